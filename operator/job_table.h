// What the allocator needs to know of one job, from the planner: the smallest GPU count a plan
// runs on (its admission size) and a scale table (best plan per GPU count up to a cap), both on
// the cluster's whole capacity of the job's allowed types.
//
// Guarantees: pure and deterministic. initial_gpus is the smallest count in [minGPUs, maxGPUs]
//   with a feasible placed plan (feasibility only grows with the count, so a doubling then a
//   bisection finds it in O(log n) searches), 0 when none. Table entries ascend, start at the
//   initial count with speedup 1, and under strict elasticity keep the initial plan's DP and
//   micro-batch (only PP changes); each entry's speedup is the planner's predicted throughput
//   over the initial plan's.
//   A job that is never resized (elasticity off) gets only its initial entry: the allocator
//   never looks further (scaler/allocator.h), and each entry costs a plan search.
//   job_table_key() names every spec field build_job_table() reads, so jobs with equal keys
//   (a sweep of one model with different seeds, names or priorities) share one table on one
//   capacity; the operator caches tables by (key, capacity).
// Caveats: the cap is min(maxGPUs, 4 x initial, capacity) (FlexTrain's setting); counts that no
//   plan fills exactly are left out.
#pragma once

#include <optional>

#include "operator/job_plan.h"
#include "operator/job_spec.h"
#include "scaler/scale_table.h"

namespace flotilla::op {

struct JobTable {
  int initial_gpus = 0;
  std::string why_not;  // when initial_gpus == 0: the planner's line
  std::string why_not_reason;  // its reason code (PlanOutcome::reason, e.g. MegatronCannotRun), "" = FitsNowhere
  scaler::ScaleTable table;
};

// The spec fields the table depends on, as one string: model (preset name or inline shape),
// global batch, worker kind, allowed GPU types, min/max GPUs, objective, budget, elasticity.
// Not the name, namespace, uid, seed, priority, steps, image, data or checkpoint.
std::string job_table_key(const JobSpec& spec);

JobTable build_job_table(const JobSpec& spec, const planner::ClusterSpec& capacity,
                         const planner::EvalContext& context);

}  // namespace flotilla::op
