// Test helper: where the command-line tools that tests drive for real (kubectl, helm) live.
//
// Guarantees: tool_path(name) is <FLOTILLA_TOOLS_DIR>/bin/<name> when scripts/install-tools.sh
//   installed the tools there (the folder exists), else the bare name, looked up on PATH.
//   tools_installed() says which: when it is true a test that needs a tool must run it and fail
//   if it does not work; it must never skip ("make test installed it" is the contract).
// Assumes: FLOTILLA_TOOLS_DIR is a compile definition (cmake/FlotillaAddTest.cmake sets it from
//   the CMake cache variable of the same name; the Makefile passes <repo>/.tools).
// Caveats: a plain `cmake` build without install-tools.sh falls back to PATH, and tests then
//   skip with a message naming the script when the tool is missing.
#pragma once

#include <filesystem>
#include <string>

namespace flotilla::testing {

inline bool tools_installed() {
#ifdef FLOTILLA_TOOLS_DIR
  const std::string dir = FLOTILLA_TOOLS_DIR;
  return !dir.empty() && std::filesystem::is_directory(std::filesystem::path(dir) / "bin");
#else
  return false;
#endif
}

inline std::string tool_path(const std::string& name) {
#ifdef FLOTILLA_TOOLS_DIR
  if (tools_installed()) return (std::filesystem::path(FLOTILLA_TOOLS_DIR) / "bin" / name).string();
#endif
  return name;
}

inline std::string tool_missing_message(const std::string& name) {
  return name + " is not installed: run scripts/install-tools.sh (make test does)";
}

}  // namespace flotilla::testing
