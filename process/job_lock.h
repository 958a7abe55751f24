// One launcher per checkpoint folder: an flock on <dir>/launcher.lock that records its pid.
//
// Guarantees:
//   - JobLock::try_acquire() takes the lock without blocking, or returns nullopt and names the
//     pid written by the holder. The kernel releases the lock when the holder exits, however
//     it exits (SIGKILL included), so a crashed launcher never blocks the next one.
//   - stop_running_job() SIGTERMs the holder once and waits (bounded) until the lock is free;
//     that is how `relaunch` hands a checkpoint folder from the old launcher to the new one.
// Assumes: a local file system with flock(); the holder exits (releasing the lock) after
//   SIGTERM once it has written its checkpoint.
// Caveats: the recorded pid is informational (it is read without the lock); the lock file is
//   never deleted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <utility>

namespace flotilla::process {

class JobLock {
 public:
  // Takes the lock or returns nullopt with *holder_pid set to the pid that holds it.
  // Throws std::runtime_error when the lock file cannot be opened.
  static std::optional<JobLock> try_acquire(const std::filesystem::path& dir, pid_t* holder_pid);
  JobLock(JobLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  JobLock& operator=(JobLock&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~JobLock();

 private:
  explicit JobLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// SIGTERMs the launcher holding dir's lock (if any) and waits until it released the lock.
// Returns false on timeout. *stopped_pid is the pid signalled (0 when the lock was free).
bool stop_running_job(const std::filesystem::path& dir, std::chrono::milliseconds timeout,
                      pid_t* stopped_pid);

}  // namespace flotilla::process
