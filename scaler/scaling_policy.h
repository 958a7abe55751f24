// The scaling controller's decisions for elastic jobs (FlexTrain §5), as pure functions over a
// snapshot. The simulator and the operator call the same functions.
//
// - scale_up_order: default priority, elastic jobs holding fewer GPUs first (ties: lower id).
// - choose_scale_up: the table entry with the highest predicted throughput within the free
//   GPUs and the cap, then (unless disabled, the "greedy" baseline) the Poisson benefit check,
//   and with it the job's own end: R seconds of training left take T_o + R/S after a scale-up
//   of speedup S and restart T_o, later than R unless R > S/(S-1)·T_o, the check's break-even
//   (required_idle_s). A job with no more than that left is not scaled up
//   (ends_before_restart_repays); the check's own answer is kept beside it.
// - plan_preemption (§5.2): reclaim scaled-up GPUs from the jobs that gained most (highest
//   speedup over their initial layout) first; a job that must give only part of its gain shrinks
//   to the best entry that still frees enough; if all scaled-up GPUs together are not enough the
//   plan is aborted and nobody shrinks. Jobs never shrink below their initial count here.
// - shrink_after_node_loss: the best feasible entry on the GPUs left (PP first under strict
//   consistency, since a strict table only holds PP changes); nullopt if nothing fits.
// Guarantees: deterministic; never crashes on empty tables or zero GPUs.
// Assumes: a job's current GPU count is one of its table's entries.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scaler/benefit_check.h"
#include "scaler/scale_table.h"

namespace flotilla::scaler {

struct ElasticJobView {
  int job_id = 0;
  int current_gpus = 0;
  const ScaleTable* table = nullptr;  // not owned
  double overhead_s = 0;              // T_overhead of a rescale of this job
  // Seconds of training left at its current speed; unset: unknown, taken as long.
  std::optional<double> remaining_s;
};

std::vector<int> scale_up_order(const std::vector<ElasticJobView>& jobs);

struct ScaleUpChoice {
  int target_gpus = 0;
  double speedup = 1;        // target throughput / current throughput
  BenefitDecision decision;  // inputs and outcome of the benefit check (also when skipped)
  bool scale = false;
  // The check passed but the job ends before the restart repays itself (scale is false).
  bool ends_before_restart_repays = false;
};

// "the job ends before the restart repays itself (it needs more than X s of training left; the
// Poisson check alone: …)". Names no live number of the job: the seconds left move every step,
// and a reason that moved with them would be a status write and an event per step.
std::string ends_before_restart_repays_explain(const ScaleUpChoice& choice);

// use_benefit_check=false is the "greedy" baseline (FlexTrain without Poisson).
std::optional<ScaleUpChoice> choose_scale_up(const ElasticJobView& job, int free_gpus,
                                             double arrival_rate_per_s, bool use_benefit_check,
                                             const BenefitCheckParams& params = {});

struct Shrink {
  int job_id = 0;
  int from_gpus = 0;
  int to_gpus = 0;
};

struct PreemptionPlan {
  bool feasible = false;
  std::vector<Shrink> shrinks;  // victims in the order chosen
  int reclaimed_gpus = 0;
  std::string reason;           // why it was aborted
};

PreemptionPlan plan_preemption(int gpus_needed, int gpus_free,
                               const std::vector<ElasticJobView>& jobs);

std::optional<ScaleEntry> shrink_after_node_loss(const ScaleTable& table, int gpus_left);

}  // namespace flotilla::scaler
