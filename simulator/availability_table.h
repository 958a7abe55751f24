// The scale table of the availability replay: the planner's best plan for every GPU count from
// the smallest feasible one up to the most GPUs the trace ever offers.
//
// For a dense planner model on one GPU type it searches, with the planner's evaluate() (through
// make_planner_predictor: per-rank memory, 1F1B time, p2p and DP all-reduce; Sailor's measured
// profiles when the job carries them), every layout dp x pp (relaxed: DP over the divisors of the
// global batch; strict: PP only at the smallest feasible DP) and keeps, per count, the fastest
// feasible one with its uneven layer split. No §4.4.4 filter: in this replay the benefit check
// is what keeps a job from restarting for a small gain, and that is what is measured.
// Guarantees: pure; entries ascend in GPU count, every entry feasible; initial = the smallest
//   feasible layout (speedups are relative to it); cap_gpus = max_gpus. One error line when the
//   model, GPU or sizes are unusable or nothing fits on max_gpus GPUs.
#pragma once

#include <optional>
#include <string>

#include "scaler/planner_predictor.h"
#include "scaler/scale_table.h"

namespace flotilla::simulator {

struct AvailabilityTable {
  std::optional<scaler::ScaleTable> table;
  scaler::ElasticModel model;  // L, global batch, checkpoint bytes (restart estimate)
  std::string error;
};

AvailabilityTable build_availability_table(
    const scaler::PlannerJob& job, int max_gpus,
    scaler::Consistency consistency = scaler::Consistency::relaxed);

// The table at tensor parallelism `tp`, or with tp == 0 the TP among 1, 2, 4, ... up to
// min(node_gpus, max_gpus) whose table fits on the fewest GPUs (the smaller TP on a tie; a
// larger TP cannot fit on fewer GPUs than it has, so the search stops there). A job that fits
// at no TP gets the TP-1 error, naming the TPs also tried. job.initial.tp is ignored.
AvailabilityTable choose_availability_table(scaler::PlannerJob job, int max_gpus,
                                            scaler::Consistency consistency, int tp,
                                            int node_gpus);

}  // namespace flotilla::simulator
