// The end of `flotilla demo`: what each plan of the elastic job really did, read from the pods'
// progress files (the sidecars' progress-e<epoch>-a<attempt>.jsonl in devcluster's pod folders),
// set against what the planner predicted (status.plan), plus the checks that decide the exit
// code: every job succeeded; the elastic job's loss log equals an uninterrupted reference run
// (`flotilla-worker run`, one process, no emulation) bit for bit; planned rescales lose no step.
//
// Guarantees: measure_plans() only reads files; run_reference() starts one worker process and
//   waits for it (bounded); print_report() writes the summary and returns the failed checks
//   (empty: all passed). Measured tokens/s is the median of rank 0's steps in an epoch after its
//   first step; emulated peak memory is the worker's high-water mark per stage (max over ranks).
//   "Resumed" is the start of the first step under a plan minus the moment the observer first saw
//   that plan in status (at most one poll, 0.3 s, after the operator decided it).
// Assumes: pods of job J are named "J-<node>-g<N>" (operator/job_plan.h) under
//   <pods_dir>/default/.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/demo_observer.h"
#include "cli/demo_scenario.h"

namespace flotilla::cli {

struct EpochMeasurement {
  std::int64_t epoch = 0;
  std::int64_t first_step = -1, last_step = -1;  // steps run under this epoch (rank 0)
  double first_step_start_unix_ms = 0;           // when the first of them started: training resumed
  double measured_tokens_per_s = 0;
  std::map<int, std::int64_t> peak_bytes_by_stage;
  std::map<int, std::string> gpu_type_by_stage;
};

// Per epoch of the job, from every pod folder of the job.
std::map<std::int64_t, EpochMeasurement> measure_plans(const std::string& pods_dir, const std::string& job);

struct ReferenceRun {
  bool ok = false;
  std::string error;
  std::string loss_log;  // the file's text
};
ReferenceRun run_reference(const std::string& worker_binary, const std::string& work_dir, int steps);

struct ReportInputs {
  const DemoObserver* observer = nullptr;
  const ScenarioResult* scenario = nullptr;
  std::map<std::int64_t, EpochMeasurement> measured;  // the elastic job's epochs
  std::string elastic_loss_log;                       // its checkpoint folder's loss.log
  ReferenceRun reference;
  double wall_seconds = 0;
};

// Prints the summary; returns one line per failed check.
std::vector<std::string> print_report(const ReportInputs& in);

}  // namespace flotilla::cli
