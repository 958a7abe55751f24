// Reading a whole file as text, for the shells (the CLI reads a file, the core takes its text)
// and for the tests and benches that read back what a program wrote.
//
// Guarantees: read_text_file() is false when the path is a directory or cannot be opened;
//   otherwise `out` holds its bytes. read_text() is for files that may not exist (yet): logs,
//   loss logs, progress lines: their bytes, or "" (a test's assertion on the content then fails
//   and names what it expected).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace flotilla {

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

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace flotilla
