// A handle on one spawned child: poll, wait with a deadline, signal it or its group, stop it.
//
// Guarantees:
//   - The handle owns the child: if it is still unreaped when the handle is destroyed, the
//     destructor SIGKILLs the child's group (or the child, when it shares our group) and reaps
//     it, unless it was release()d. So a test or a launcher that forgets a child leaves no
//     process and no zombie behind.
//   - poll()/wait_*() reap only this pid (reap.h) and remember the status; calling them again
//     returns the same status.
//   - terminate(grace): SIGTERM to the group, wait up to `grace`, then SIGKILL to the group and
//     wait; returns how it ended.
// Assumes: one thread uses a Child at a time; the child is ours (made by spawn() or
//   fork_call()).
// Caveats: once the child is reaped its pid may be reused, so signals to it after that are not
//   sent (signal() returns false) and the destructor leaves its group alone. A group outlives
//   its leader: signal_group() still reaches the remaining members after the leader was reaped
//   (terminate() does so right after the exit); that relies on Linux not reusing the id while
//   any member lives.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "process/exit_status.h"

namespace flotilla::process {

class Child {
 public:
  Child() = default;
  // pgid: the child's own process group, or 0 when it stayed in ours.
  Child(pid_t pid, pid_t pgid) : pid_(pid), pgid_(pgid) {}
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  pid_t pgid() const { return pgid_; }
  bool valid() const { return pid_ > 0; }

  // Reaps without blocking; nullopt while it runs.
  std::optional<ExitStatus> poll();
  bool running() { return valid() && !poll(); }
  std::optional<ExitStatus> wait_until(std::chrono::steady_clock::time_point deadline);
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout) {
    return wait_until(std::chrono::steady_clock::now() + timeout);
  }
  ExitStatus wait();
  const std::optional<ExitStatus>& exit_status() const { return status_; }

  bool signal(int sig);        // the child alone, while it is not reaped
  bool signal_group(int sig);  // its whole group (the child alone when it has none)
  ExitStatus terminate(std::chrono::milliseconds grace);

  // Gives up ownership: the destructor leaves the process alone. Returns its pid.
  pid_t release();

 private:
  pid_t pid_ = -1;
  pid_t pgid_ = 0;
  std::optional<ExitStatus> status_;
};

}  // namespace flotilla::process
