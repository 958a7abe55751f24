// Helpers for the worker runtime tests: they drive the real flotilla-worker binary as
// separate processes (no fakes), on a generated text file, in a fresh temporary folder.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/text_file.h"
#include "process/spawn.h"
#include "tests/common/corpus.h"

namespace flotilla::worker::testing {

// `sh -c command` in the background, in our process group like a job started from a shell.
// The Child (process/child.h) kills and reaps it if a test returns before waiting for it.
inline process::Child start_shell(const std::string& command) {
  process::SpawnOptions options;
  options.argv = {"/bin/sh", "-c", command};
  options.isolation = process::Isolation::kNone;
  return process::spawn(options);
}


inline std::string worker_binary() {
  return std::string(FLOTILLA_BINARY_DIR) + "/worker/flotilla-worker";
}

// A fresh folder under the build tree, removed and recreated per call.
inline std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::path(FLOTILLA_BINARY_DIR) / "tests-tmp" / "worker" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Deterministic English-like text (so the model has something to learn), `bytes` long.
inline std::filesystem::path write_text_file(const std::filesystem::path& dir, std::size_t bytes = 40000) {
  return flotilla::testing::write_corpus(dir, bytes);
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string read_file(const std::filesystem::path& path) { return flotilla::read_text(path); }

inline int count_lines(const std::filesystem::path& path) {
  std::string s = read_file(path);
  int n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

// Polls `ready` every 10 ms for up to `timeout`; returns whether it became true.
template <class F>
bool wait_until(F ready, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace flotilla::worker::testing
