// FlexTrain-style online profiling: fold the per-stage times a running job measured into its
// cost model and rebuild its scale table, so later scaling decisions use measured speed.
//
// Input is what the worker reports in its `step` progress lines (docs/worker.md): for each rank,
// its pipeline stage and the forward/backward seconds of each of its micro-batches. The fold:
//   predicted forward of stage s = units_s x layer_fwd_s, backward = units_s x layer_bwd_s, where
//   units_s counts the stage's layers as predict_pipeline splits them for the running layout
//   (1 per transformer layer, extra_layer_cost_factor per MTP head, embedding_cost_factor for the
//   embedding on the first and the head on the last stage);
//   forward ratio = sum over stages of the measured mean forward per micro-batch / sum of the
//   predicted (likewise backward), each clamped to [min_ratio, max_ratio];
//   the model's layer_fwd_s and layer_bwd_s are multiplied by the ratios and the table rebuilt.
// Communication (p2p, DP all-reduce) stays as modelled, so a job whose compute is slower than
// predicted sees communication weigh less and its speedups from more stages rise (and vice
// versa); a uniform error in both compute and communication would cancel in the speedups.
// Guarantees: pure; bad input (no measurements, a stage outside the running PP, a non-positive
//   or non-finite time) is one error line, never a crash; the clamp bounds how far one
//   measurement can move the table.
// Assumes: the measurements are steady-state (the caller drops warm-up steps) and were taken on
//   `running`, the layout the job runs now; ranks of one stage (DP replicas) are averaged.
// Caveats: for the scaler's own cost model (elastic_model.h, predict_pipeline); tables built on
//   the planner's model need the planner's profile updated instead (not done here).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scaler/elastic_model.h"
#include "scaler/scale_table.h"

namespace flotilla::scaler {

struct StageMeasurement {
  int stage = 0;                        // pipeline stage of the reporting rank
  std::vector<double> forward_seconds;  // one per micro-batch of one step
  std::vector<double> backward_seconds;
};

struct OnlineProfileParams {
  double min_ratio = 0.5;  // measured / predicted is clamped to [min_ratio, max_ratio]
  double max_ratio = 2.0;
};

struct OnlineProfileResult {
  std::optional<ElasticModel> model;  // the rescaled cost model
  std::optional<ScaleTable> table;    // rebuilt from it (empty with table_error if infeasible)
  std::string table_error;
  double raw_forward_ratio = 1, raw_backward_ratio = 1;  // measured / predicted
  double forward_ratio = 1, backward_ratio = 1;          // as applied, after the clamp
  bool clamped = false;
  std::string error;  // bad input: nothing was folded

  std::string explain() const;  // one line for status and metrics
};

// One rank's `step` progress line (schema: common/progress_line.h, written by the worker) as
// the measurement of its stage; nullopt with *error set when it is not a step line.
std::optional<StageMeasurement> stage_measurement_from_progress_line(std::string_view line,
                                                                     std::string* error = nullptr);

OnlineProfileResult fold_measured_stage_times(const ElasticModel& model,
                                              const ParallelConfig& running,
                                              const std::vector<StageMeasurement>& measured,
                                              const ScaleTableParams& table_params = {},
                                              const OnlineProfileParams& params = {});

}  // namespace flotilla::scaler
