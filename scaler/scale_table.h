// Scale table of one elastic job (FlexTrain §4.4): the best layout for every GPU count from a
// minimum up to a cap, with its predicted speedup over the job's initial layout.
//
// Strict consistency changes only PP (DP, TP, CP, micro-batch and global batch fixed), so the
// loss stays bit-for-bit the same; relaxed changes DP and PP. Each count's best layout is the
// feasible one (no OOM, B divisible by DP, PP <= L; any PP, uneven splits allowed) with the
// lowest simulation-based iteration time. Counts above the initial one are then filtered with
// the modeling-based predictor (scale_filter.h). Counts below the initial one are kept
// unfiltered: they are where a job shrinks to after losing a node.
//
// Guarantees: pure; entries ascend in GPU count; the initial layout is always an entry with
//   speedup 1; a job whose initial layout is infeasible gets an error line, not a table. Every
//   entry carries what a launch needs without planning again: the stage split over the
//   model's blocks (each block in exactly one stage), and the GPU type and TP of each stage.
// Caveats: the cap defaults to 4x the initial GPU count (FlexTrain's setting).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "scaler/elastic_model.h"
#include "scaler/pipeline_predictor.h"
#include "scaler/scale_filter.h"

namespace flotilla::scaler {

enum class Consistency { strict, relaxed };

struct ScaleTableParams {
  Consistency consistency = Consistency::strict;
  int cap_gpus = 0;          // 0: cap_factor x the initial count
  double cap_factor = 4.0;
  ScaleFilterParams filter;
  // false keeps every count above the initial one unfiltered too: the table is then simply the
  // best layout per GPU count (the availability replay, where the benefit check is the filter).
  bool filter_above_initial = true;
  // The GPU type the job runs on, copied into every entry ("" when the caller does not know).
  std::string gpu_type;
};

// One row of a table: the layout and its speedups (ScaleCandidate) plus the launch details.
struct ScaleEntry : ScaleCandidate {
  // Blocks per stage, in pipeline order, in the planner's indexing (planner/model_spec.h):
  // block 0 = embedding, 1..L = the L pipeline layers, L+1 = head, so the entry covers L+2
  // blocks; stage s takes the next blocks_per_stage[s] of them. Size = config.pp.
  std::vector<int> blocks_per_stage;
  std::vector<int> tp_per_stage;                 // config.tp for every stage
  std::vector<std::string> gpu_type_per_stage;   // ScaleTableParams::gpu_type for every stage
};

// Any time model that maps a layout to iteration seconds and feasibility; the default is
// predict_pipeline. The operator can pass a planner- or measurement-backed one.
using IterationPredictor = std::function<PipelinePrediction(const ParallelConfig&)>;

struct ScaleTable {
  ParallelConfig initial;
  int cap_gpus = 0;
  std::vector<ScaleEntry> entries;          // ascending gpus
  std::vector<RejectedCandidate> rejected;  // dropped by the §4.4.4 filter

  // The entry with the highest speedup among those with min_gpus <= gpus <= max_gpus.
  const ScaleEntry* best_within(int max_gpus, int min_gpus = 0) const;
  const ScaleEntry* find(int gpus) const;
  double speedup_at(int gpus) const;  // speedup of the entry with exactly `gpus`, else 0
};

struct ScaleTableResult {
  std::optional<ScaleTable> table;
  std::string error;  // set when table is empty
};

ScaleTableResult build_scale_table(const ElasticModel& model, const ScaleTableParams& params,
                                   const IterationPredictor& predictor = {});

}  // namespace flotilla::scaler
