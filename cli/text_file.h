// Reading a whole text file for the CLI commands (the shell does the I/O, the core takes text).
//
// Guarantees: false when the file cannot be opened; otherwise `out` holds its bytes.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace flotilla::cli {

inline bool read_text_file(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

}  // namespace flotilla::cli
