#include "worker/launch/start_job.h"

#include <exception>

namespace flotilla::worker {
namespace {

std::string describe(std::chrono::milliseconds d) {
  if (d.count() % 60000 == 0)
    return std::to_string(d.count() / 60000) + (d.count() == 60000 ? " minute" : " minutes");
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

StartedJob failed(StartedJob job, std::string error, int code) {
  job.error = std::move(error);
  job.exit_code = code;
  job.group.reset();  // kills and reaps ranks already started, then the lock goes
  job.lock.reset();
  return job;
}

}  // namespace

StartedJob start_job(const JobStart& request) {
  StartedJob job;
  const std::string dir = request.checkpoint_dir.string();
  if (request.stop_running_job) {
    bool stopped_in_time = false;
    try {
      stopped_in_time =
          process::stop_running_job(request.checkpoint_dir, request.stop_timeout, &job.stopped_pid);
    } catch (const std::exception& e) {
      return failed(std::move(job), e.what(), 2);
    }
    job.stop_timed_out = !stopped_in_time;
    if (!stopped_in_time)
      return failed(std::move(job),
                    "the running job on '" + dir + "' did not stop within " +
                        describe(request.stop_timeout) + " of SIGTERM",
                    1);
    if (job.stopped_pid > 0 && request.on_stopped) request.on_stopped(job.stopped_pid);
  }
  if (request.identity)
    if (std::string e = check_resume_compatibility(request.checkpoint_dir, *request.identity);
        !e.empty())
      return failed(std::move(job), e, 2);
  pid_t holder = 0;
  try {
    job.lock = process::JobLock::try_acquire(request.checkpoint_dir, &holder);
  } catch (const std::exception& e) {
    return failed(std::move(job), e.what(), 2);
  }
  if (!job.lock)
    return failed(std::move(job),
                  "another flotilla-worker launcher (pid " + std::to_string(holder) +
                      ") is running on '" + dir +
                      "'; use `flotilla-worker relaunch` to change its layout",
                  2);
  job.group = std::make_unique<process::ProcessGroup>();
  try {
    if (request.spawn) request.spawn(*job.group);
  } catch (const std::exception& e) {
    return failed(std::move(job), e.what(), 1);
  }
  return job;
}

}  // namespace flotilla::worker
