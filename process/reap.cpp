#include "process/reap.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <thread>

namespace flotilla::process {

std::optional<ExitStatus> try_reap(pid_t pid) {
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return ExitStatus::from_wait_status(status);
    if (r == 0) return std::nullopt;
    if (errno == EINTR) continue;
    ExitStatus gone;
    gone.unknown = true;  // ECHILD: not our child, or already reaped
    return gone;
  }
}

bool has_exited(pid_t pid) {
  siginfo_t info{};
  for (;;) {
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0)
      return info.si_pid == pid;
    if (errno != EINTR) return true;  // ECHILD: not (or no longer) ours
  }
}

std::optional<ExitStatus> reap_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (auto s = try_reap(pid)) return s;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

ExitStatus reap(pid_t pid) {
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, 0);
    if (r == pid) return ExitStatus::from_wait_status(status);
    if (r < 0 && errno == EINTR) continue;
    ExitStatus gone;
    gone.unknown = true;
    return gone;
  }
}

}  // namespace flotilla::process
