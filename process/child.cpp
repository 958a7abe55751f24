#include "process/child.h"

#include <signal.h>

#include <utility>

#include "process/group_signal.h"
#include "process/reap.h"

namespace flotilla::process {

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pgid_(std::exchange(other.pgid_, 0)),
      status_(std::exchange(other.status_, std::nullopt)) {}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    Child old(std::move(*this));  // the old child is killed and reaped here
    pid_ = std::exchange(other.pid_, -1);
    pgid_ = std::exchange(other.pgid_, 0);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

Child::~Child() {
  if (!valid() || status_) return;  // already reaped: its pid (and group id) may be reused
  // Not reaped (running or a zombie), so the ids are still ours: the group goes with it.
  if (pgid_ > 0) process::signal_group(pgid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  status_ = reap(pid_);
}

std::optional<ExitStatus> Child::poll() {
  if (!status_ && valid()) status_ = try_reap(pid_);
  return status_;
}

std::optional<ExitStatus> Child::wait_until(std::chrono::steady_clock::time_point deadline) {
  if (!status_ && valid()) status_ = reap_until(pid_, deadline);
  return status_;
}

ExitStatus Child::wait() {
  if (!status_ && valid()) status_ = reap(pid_);
  return status_.value_or(ExitStatus{0, 0, true});
}

bool Child::signal(int sig) {
  if (!valid() || poll()) return false;
  return ::kill(pid_, sig) == 0;
}

bool Child::signal_group(int sig) {
  if (!valid()) return false;
  if (pgid_ > 0) return process::signal_group(pgid_, sig);
  return signal(sig);
}

ExitStatus Child::terminate(std::chrono::milliseconds grace) {
  if (!valid()) return ExitStatus{0, 0, true};
  signal_group(SIGTERM);
  if (auto s = wait_for(grace)) {
    if (pgid_ > 0) process::signal_group(pgid_, SIGKILL);  // stragglers of the group
    return *s;
  }
  signal_group(SIGKILL);
  return wait();
}

pid_t Child::release() {
  pid_t pid = pid_;
  pid_ = -1;
  pgid_ = 0;
  status_.reset();
  return pid;
}

}  // namespace flotilla::process
