// Adapter: the planner's simulation-based time and memory model (flotilla::planner::evaluate)
// as the scaler's IterationPredictor, so scale tables can put FlexTrain's eq. 5/6 side by side
// with the planner's 1F1B model for dense models the planner knows (Llama, GPT, OPT presets).
//
// For a layout (dp, pp, tp) it builds a homogeneous planner Plan: pp contiguous stages over the
// model's blocks (embedding, layers, head), split unevenly where pp does not divide them by
// balancing the planner's own per-block forward+backward times, dp replicas of one GPU type in
// one zone, micro-batch 1, the job's global batch. Feasibility and peak bytes per stage come
// from the planner's per-rank memory model; an OOM plan is infeasible with its message.
// Guarantees: pure; the returned predictor owns what it needs (catalog, compute, network).
// Profiles and network: by default the planner's FLOP-based compute estimate and its default
//   network; a caller that has loaded Sailor's measured profiles (planner/profile_io.h) or network
//   fits passes them in (shared, never copied). gpus_per_node > 0 overrides the catalog's node
//   size for the GPU type (it decides which DP all-reduces stay on NVLink).
// Caveats: the planner has no context parallelism or MoE, so cp must be 1 and the FlexTrain
//   Table-2 MoE jobs of the trace simulator keep the scaler's own cost model (elastic_model.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "planner/model_spec.h"
#include "planner/plan.h"
#include "scaler/elastic_model.h"
#include "scaler/scale_table.h"

namespace flotilla::planner {
class ProfileSet;
struct NetworkModel;
}  // namespace flotilla::planner

namespace flotilla::scaler {

struct PlannerJob {
  planner::ModelSpec model;
  std::string gpu_type;  // a name the planner's built-in catalog knows
  int global_batch = 0;
  ParallelConfig initial;
  planner::TrainingOptions options;
  std::shared_ptr<const planner::ProfileSet> profiles;   // null: FLOP estimate
  std::shared_ptr<const planner::NetworkModel> network;  // null: default_network_model()
  int gpus_per_node = 0;                                 // 0: the catalog's node size
};

struct PlannerPredictor {
  IterationPredictor predictor;  // empty when error is set
  ElasticModel elastic_model;    // L, B, initial layout and checkpoint size for eq. 5/6
  std::string error;
};

PlannerPredictor make_planner_predictor(const PlannerJob& job);

}  // namespace flotilla::scaler
