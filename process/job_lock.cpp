#include "process/job_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace flotilla::process {

std::optional<JobLock> JobLock::try_acquire(const std::filesystem::path& dir, pid_t* holder_pid) {
  std::filesystem::create_directories(dir);
  auto path = dir / "launcher.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open '" + path.string() + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (holder_pid) *holder_pid = n > 0 ? static_cast<pid_t>(std::atoi(buf)) : 0;
    ::close(fd);
    return std::nullopt;
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is a convenience for relaunch; the lock itself is what matters.
  }
  return JobLock(fd);
}

JobLock::~JobLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool stop_running_job(const std::filesystem::path& dir, std::chrono::milliseconds timeout,
                      pid_t* stopped_pid) {
  if (stopped_pid) *stopped_pid = 0;
  pid_t holder = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool signalled = false;
  while (true) {
    auto lock = JobLock::try_acquire(dir, &holder);
    if (lock) return true;  // released when `lock` goes out of scope; the caller retakes it
    if (!signalled && holder > 0) {
      ::kill(holder, SIGTERM);
      signalled = true;
      if (stopped_pid) *stopped_pid = holder;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace flotilla::process
