// The (re)launch sequence of a training job on this machine, callable from the worker's
// launcher and from the trainer sidecar alike (this target links no trainer, cuBLAS or CUDA):
//
//   1. relaunch only: SIGTERM the launcher holding the checkpoint folder's JobLock and wait
//      (bounded) until it has checkpointed and exited (process/job_lock.h);
//   2. check that the newest complete checkpoint can resume this job (resume_check.h);
//   3. take the folder's JobLock (one launcher per job);
//   4. call `spawn` with a fresh process::ProcessGroup to start the ranks.
//
// Guarantees: the steps run in this order and stop at the first failure, which is one line in
//   `error` with the exit code the worker's launcher uses for it (2: refused input, another
//   launcher holds the lock, a checkpoint that cannot resume; 1: the old job did not stop in
//   time, spawning failed). On success the caller holds the lock and the group, and the ranks
//   run; it waits with group->wait_all(). stopped_pid names the launcher stopped in step 1
//   (also on a later failure), 0 if none was running.
// Assumes: `spawn` starts every rank or throws (std::exception; its what() becomes the error).
// Caveats: the lock is released when `lock` is destroyed, so keep the result alive until the
//   ranks have exited.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "process/job_lock.h"
#include "process/process_group.h"
#include "worker/launch/resume_check.h"

namespace flotilla::worker {

struct JobStart {
  std::filesystem::path checkpoint_dir;
  bool stop_running_job = false;  // relaunch: stop the launcher that holds the folder first
  std::chrono::milliseconds stop_timeout = std::chrono::minutes(10);
  // What the newest checkpoint must match; nullopt skips the early check (the ranks still
  // check when they load).
  std::optional<ResumeIdentity> identity;
  // Called once step 1 has stopped a running launcher (its pid), before step 2.
  std::function<void(pid_t)> on_stopped;
  std::function<void(process::ProcessGroup&)> spawn;
};

struct StartedJob {
  std::string error;  // empty: the ranks run
  int exit_code = 0;
  pid_t stopped_pid = 0;
  bool stop_timed_out = false;  // step 1 gave up: stopped_pid is still running
  std::optional<process::JobLock> lock;
  std::unique_ptr<process::ProcessGroup> group;
  bool ok() const { return error.empty(); }
};

StartedJob start_job(const JobStart& request);

}  // namespace flotilla::worker
