// Reading a whole text file for the CLI commands (the shell does the I/O, the core takes text).
//
// Guarantees: false when the path is a directory or cannot be opened; otherwise `out` holds
//   its bytes.
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

}  // namespace flotilla::cli
