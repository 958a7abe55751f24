// Local process management for a job's ranks: spawn, forward signals, wait, clean up.
// Reused by the trainer sidecar to (re)launch workers inside a pod.
//
// Guarantees:
//   - spawn() starts a child with extra environment variables (fork + execv); the child gets
//     SIGTERM if the parent dies (PR_SET_PDEATHSIG) so no orphan ranks survive a killed launcher.
//   - wait_all() returns when every child has exited. The first child that fails (non-zero
//     exit or killed by a signal) makes the group SIGTERM the rest, then SIGKILL them after
//     `kill_grace`; the result names that first failure and marks the children it had to
//     SIGKILL (a stopped or hung rank ignores SIGTERM). A stop request (request_stop(), e.g.
//     from a SIGTERM handler) forwards SIGTERM to every child once and keeps waiting.
//   - JobLock: one launcher per checkpoint folder. It holds an flock on <dir>/launcher.lock
//     (released by the kernel when the launcher exits, however it exits) and records its pid,
//     so `relaunch` can find it, SIGTERM it and wait until it is gone.
// Assumes: POSIX; children are this machine's processes.
// Caveats: the stop flag is process-wide (signal handlers cannot carry context).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla::worker {

struct ChildExit {
  pid_t pid = 0;
  int exit_code = 0;    // valid when signal == 0
  int signal = 0;       // the killing signal, 0 when it exited
  bool killed_by_group = false;  // SIGKILLed by wait_all after ignoring SIGTERM for kill_grace
  bool ok() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;
};

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ~ProcessGroup();  // SIGKILLs and reaps children that are still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  pid_t spawn(const std::string& program, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& extra_env);
  void signal_all(int sig);
  struct Result {
    bool ok = true;
    std::vector<ChildExit> exits;  // in spawn order
    std::optional<ChildExit> first_failure;
  };
  Result wait_all(std::chrono::milliseconds kill_grace = std::chrono::milliseconds(3000));
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<pid_t> pids_;
  std::vector<bool> reaped_;
};

// Installs SIGTERM/SIGINT handlers that set the process-wide stop flag.
void install_stop_handlers();
bool stop_requested();
void request_stop();

// A free TCP port on 127.0.0.1 (bind to port 0, read it, close).
int pick_free_port();

// Path of the running binary (/proc/self/exe).
std::string self_executable();

class JobLock {
 public:
  // Takes the lock or returns nullopt with *holder_pid set to the pid that holds it.
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
// Returns false on timeout.
bool stop_running_job(const std::filesystem::path& dir, std::chrono::milliseconds timeout,
                      pid_t* stopped_pid);

}  // namespace flotilla::worker
