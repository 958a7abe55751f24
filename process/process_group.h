// A group of children that succeed or fail together: a job's ranks under one launcher.
// Reused by the trainer sidecar to (re)launch workers inside a pod.
//
// Guarantees:
//   - spawn() starts a child (spawn.h) with extra environment variables; by default it stays
//     in our process group and gets SIGTERM if we die (PR_SET_PDEATHSIG, re-checked after
//     setting it), so no orphan ranks survive a killed launcher.
//   - wait_all() returns when every child has exited. The first child that fails (non-zero
//     exit or killed by a signal) makes the group SIGTERM the rest, then SIGKILL them after
//     `kill_grace`; the result names that first failure and marks the children it had to
//     SIGKILL (a stopped or hung rank ignores SIGTERM). A stop request (request_stop() or a
//     signal caught by install_stop_handlers(), stop_flag.h) forwards SIGTERM to every child
//     once and keeps waiting.
//   - The destructor SIGKILLs and reaps children that are still running.
// Assumes: children are this machine's processes; one thread drives the group.
// Caveats: the stop flag is process-wide (signal handlers cannot carry context); wait_all()
//   polls every 5 ms.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "process/child.h"
#include "process/spawn.h"

namespace flotilla::process {

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
  ~ProcessGroup() = default;  // each Child SIGKILLs and reaps itself if still running
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // The launcher's form: program + args, our environment plus extra_env, SIGTERM on our death.
  pid_t spawn(const std::string& program, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& extra_env);
  // Any SpawnOptions (isolation, log files, working dir, ...).
  pid_t spawn(const SpawnOptions& options);
  void signal_all(int sig);
  struct Result {
    bool ok = true;
    std::vector<ChildExit> exits;  // in spawn order
    std::optional<ChildExit> first_failure;
  };
  Result wait_all(std::chrono::milliseconds kill_grace = std::chrono::milliseconds(3000));
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::vector<Child> children_;
  std::vector<pid_t> pids_;
};

}  // namespace flotilla::process
