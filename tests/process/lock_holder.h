// Test support: a child process that holds a checkpoint folder's job lock the way a running
// launcher does, for the tests of stop_running_job (tests/process) and of the relaunch sequence
// (tests/worker/launch_test.cpp).
//
// Guarantees: fork_lock_holder() returns once the child has tried the lock; `holds_lock` says
//   whether it got it. On SIGTERM the child lingers 100 ms ("writing a checkpoint"), then exits
//   0, releasing the lock. The returned Child kills and reaps it on destruction.
#pragma once

#include <unistd.h>

#include <filesystem>

#include "process/child.h"
#include "process/fork_call.h"
#include "process/job_lock.h"
#include "process/stop_flag.h"

namespace flotilla::testing {

inline process::Child fork_lock_holder(const std::filesystem::path& dir, bool& holds_lock) {
  holds_lock = false;
  int fds[2];
  if (::pipe(fds) != 0) return {};
  process::Child holder = process::fork_call([&] {
    pid_t ignored = 0;
    auto lock = process::JobLock::try_acquire(dir, &ignored);
    process::install_stop_handlers();
    char ready = lock ? 1 : 0;
    (void)!::write(fds[1], &ready, 1);
    while (!process::stop_requested()) ::usleep(1000);
    ::usleep(100 * 1000);  // "writing a checkpoint"
    return 0;
  });
  ::close(fds[1]);
  char ready = 0;
  holds_lock = ::read(fds[0], &ready, 1) == 1 && ready == 1;
  ::close(fds[0]);
  return holder;
}

}  // namespace flotilla::testing
