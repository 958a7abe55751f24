// The worker processes of one attempt: one `flotilla-worker rank` per planned rank of this pod
// (worker kind flotilla), or the pod's one torchrun agent (worker kind megatron).
//
// Guarantees:
//   - start() spawns every process through process/spawn.h: own process group, SIGTERM to it
//     when the sidecar dies (PR_SET_PDEATHSIG), stdout+stderr appended to its log; for the
//     reference worker, <work>/rank-<local>.log and the torchrun-style environment of
//     worker_args.h. If one spawn throws (e.g. std::system_error ENOENT: no such program), the
//     ones started are killed and the exception propagates.
//   - poll() reaps without blocking and reports the first process that failed (non-zero exit
//     or a signal) once, "<label>: <one line from its log>", and when every one has exited.
//   - stop(grace) SIGTERMs every running rank's group; kill_overdue() SIGKILLs those still
//     alive once the grace has passed. The destructor SIGKILLs and reaps what is left.
// Assumes: one thread drives it.
// Caveats: the message is the process's failure_line() of its log (the reference worker's: the
//   last line that mentions "error"; torchrun's: torchrun_failure.h), else how it ended.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/pod_plan.h"
#include "process/child.h"
#include "trainer-sidecar/worker_args.h"

namespace flotilla::sidecar {

struct WorkerPoll {
  std::optional<std::string> new_failure;  // the first failure, reported once
  bool all_exited = false;
  bool all_ok = false;
};

// The last line of `log` that mentions "error", else "" (the reference worker prints one).
std::string last_error_line(const std::filesystem::path& log);
// torchrun_failure_line() (torchrun_failure.h) of the whole log: a torchrun agent's.
std::string torchrun_log_failure(const std::filesystem::path& log);

// One process of an attempt.
struct WorkerProcess {
  std::string label;  // names it in the failure line: "local rank 0", "torchrun"
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to the sidecar's environment
  std::filesystem::path log;               // stdout and stderr
  // The one line of the log that says why it failed ("" when none does).
  std::string (*failure_line)(const std::filesystem::path& log) = last_error_line;
};

class WorkerSet {
 public:
  using Clock = std::chrono::steady_clock;
  void start(const PodPlan& plan, const std::string& worker_binary,
             const std::filesystem::path& work_dir, const RankLaunch& launch,
             const std::string& master_addr, int master_port);
  void start(const std::vector<WorkerProcess>& processes);
  WorkerPoll poll();
  void stop(std::chrono::milliseconds grace);
  void kill_overdue();
  bool running() const { return !ranks_.empty() && !all_exited_; }
  std::vector<pid_t> pids() const;

 private:
  struct Rank {
    process::Child child;
    std::string label;
    std::filesystem::path log;
    std::string (*failure_line)(const std::filesystem::path& log) = last_error_line;
    std::optional<process::ExitStatus> status;
  };
  std::vector<Rank> ranks_;
  bool failure_reported_ = false;
  bool all_exited_ = false;
  std::optional<Clock::time_point> kill_at_;
};

}  // namespace flotilla::sidecar
