// One elastic job's scaling decision from a snapshot, job by job: the trace simulator's and the
// availability replay's call (docs/scaler.md; data flow: decide(job, scale table, arrivals λ) →
// keep / up / down). The operator decides over all jobs at once (allocator.h); both take the
// scale-up through the same choose_scale_up (scaling_policy.h), so the benefit check and the
// job's-end guard are one rule.
//
// Order of precedence:
//   1. lost GPUs (gpus_alive < current): shrink to the best feasible entry on what is alive,
//      PP first under strict consistency (shrink_after_node_loss); none fits → requeue;
//   2. somebody waits (queue_empty = false): keep (scale-down for waiting jobs is a cluster-wide
//      decision, plan_preemption, taken by the caller across all jobs);
//   3. free GPUs: choose_scale_up + benefit check with T_overhead from the measured restart time
//      when known, else the checkpoint/bandwidth estimate (restart_overhead.h); a job with no
//      more training left than the check's break-even S/(S-1)·T_overhead keeps its GPUs
//      (ends_before_restart_repays; remaining_s unset: taken as long).
// Guarantees: pure; the Decision says why in one line and carries the benefit check's inputs
//   (λ, S, T_overhead, probability) whenever a scale-up was considered.
#pragma once

#include <optional>
#include <string>

#include "scaler/benefit_check.h"
#include "scaler/restart_overhead.h"
#include "scaler/scale_table.h"

namespace flotilla::scaler {

struct JobSnapshot {
  int current_gpus = 0;
  int gpus_alive = -1;      // GPUs of its allocation still healthy; -1 = all of them
  int free_gpus = 0;        // idle GPUs it could take
  bool queue_empty = true;  // no job waiting for GPUs
  double arrival_rate_per_s = 0;  // λ from ArrivalRateEstimator
  double checkpoint_bytes = 0;
  std::optional<double> measured_restart_s;
  std::optional<double> remaining_s;  // training left at the current speed; unset: long
};

struct DecideParams {
  BenefitCheckParams benefit;
  RestartOverheadParams overhead;
  bool use_benefit_check = true;
};

enum class ScaleAction { keep, scale_up, shrink, requeue };
const char* to_string(ScaleAction a);

struct Decision {
  ScaleAction action = ScaleAction::keep;
  int target_gpus = 0;
  std::optional<ScaleEntry> target;      // the layout to run next (scale_up, shrink)
  std::optional<BenefitDecision> benefit;  // set when a scale-up was considered
  double overhead_s = 0;
  // keep although the check passed: the job ends before the restart repays itself.
  bool ends_before_restart_repays = false;
  std::string reason;                    // one line for status, events and metrics
};

Decision decide(const ScaleTable& table, const JobSnapshot& job, const DecideParams& params = {});

}  // namespace flotilla::scaler
