// Simulation-based iteration time and per-stage peak memory of one layout (the scaler's own
// stand-in for the planner's time model; see docs/scaler.md "Two predictors").
//
// Model: the L pipeline layers (transformer layers, then MTP heads) are split into p contiguous
//   stages, unevenly where p does not divide L, minimising the slowest stage (exact DP over
//   split points). The embedding sits on the first stage and the output head + loss on the last.
//   1F1B: iteration = sum of stage times + (m−1)·slowest stage + 2(p−1)·p2p, plus a ring
//   all-reduce of the largest stage's gradients when dp > 1. Stage i of p holds activations of
//   up to min(p−i, m) in-flight micro-batches (1F1B), plus its static bytes.
// Guarantees: pure and deterministic. Infeasible layouts (p > L, B % d != 0, a stage over GPU
//   memory) come back with feasible=false and a reason, never a crash; peak bytes are reported
//   for every stage, not an average.
// Caveats: per-layer costs are the ElasticModel's estimates; no VPP interleaving (eq. 5 models
//   VPP; the difference between the two is what the §4.4.4 discrepancy filter looks at).
#pragma once

#include <string>
#include <vector>

#include "scaler/elastic_model.h"
#include "scaler/parallel_config.h"

namespace flotilla::scaler {

struct PipelinePrediction {
  bool feasible = false;
  std::string infeasible_reason;
  double iteration_s = 0;
  std::vector<int> layers_per_stage;
  std::vector<double> peak_bytes_per_stage;
};

PipelinePrediction predict_pipeline(const ElasticModel& model, const ParallelConfig& config);

// Contiguous split of `costs` into `parts` non-empty stages minimising the largest stage cost,
// where stage 0 additionally costs first_extra and the last stage last_extra. Returns the
// number of layers per stage (empty when parts < 1 or parts > costs.size()).
std::vector<int> balanced_split(const std::vector<double>& costs, int parts, double first_extra,
                                double last_extra);

}  // namespace flotilla::scaler
