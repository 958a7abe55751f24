// Test support: a whole file as a string, for the tests and benches that read back what a
// program wrote (logs, progress lines, rendered charts, data files).
//
// Guarantees: the file's bytes, unchanged; "" when it is missing or unreadable, so the caller's
//   assertion on the content fails and names what it expected.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace flotilla::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace flotilla::testing
