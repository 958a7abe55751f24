// Reading a whole text file for the CLI commands (the shell does the I/O, the core takes text).
//
// Guarantees: read_text_file() is false when the path is a directory or cannot be opened;
//   otherwise `out` holds its bytes. read_text_or_empty() is for files a program wrote that may
//   not exist yet (logs, loss logs): their bytes, or "".
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace flotilla::cli {

inline bool read_text_file(const std::string& path, std::string& out) {
  std::error_code ec;
  // A directory opens as a stream on Linux and reads as empty text: say it cannot be read.
  if (std::filesystem::is_directory(path, ec)) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

inline std::string read_text_or_empty(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace flotilla::cli
