// Test helper: runs the built `flotilla` binary with a shell command line and captures its exit
// code, stdout and stderr (each run in its own files under one scratch folder per process, so
// ctest -j's test processes never share an output file).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace flotilla::cli_test {

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// <build>/<test_name>_tmp/<pid>/, created on first use.
inline const std::filesystem::path& scratch(const std::string& test_name) {
  static const std::filesystem::path dir = [&] {
    auto d = std::filesystem::path(FLOTILLA_BINARY_DIR) / (test_name + "_tmp") / std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline CliRun run_flotilla(const std::filesystem::path& scratch_dir, const std::string& args) {
  static int counter = 0;
  const auto out = scratch_dir / ("out" + std::to_string(counter) + ".txt");
  const auto err = scratch_dir / ("err" + std::to_string(counter++) + ".txt");
  const std::string command =
      std::string(FLOTILLA_BINARY_DIR) + "/cli/flotilla " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

}  // namespace flotilla::cli_test
