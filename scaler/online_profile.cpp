#include "scaler/online_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/progress_line.h"
#include "scaler/pipeline_predictor.h"

namespace flotilla::scaler {

namespace {

// Mean of positive finite values; -1 when empty or any value is bad.
double mean_of(const std::vector<double>& v) {
  if (v.empty()) return -1;
  double s = 0;
  for (double x : v) {
    if (!(x > 0) || !std::isfinite(x)) return -1;
    s += x;
  }
  return s / static_cast<double>(v.size());
}

}  // namespace

std::string OnlineProfileResult::explain() const {
  if (!error.empty()) return "online profile not applied: " + error;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "online profile: forward x%.3f (measured/predicted %.3f), backward x%.3f (%.3f)%s",
                forward_ratio, raw_forward_ratio, backward_ratio, raw_backward_ratio,
                clamped ? ", clamped" : "");
  return buf;
}

OnlineProfileResult fold_measured_stage_times(const ElasticModel& model,
                                              const ParallelConfig& running,
                                              const std::vector<StageMeasurement>& measured,
                                              const ScaleTableParams& table_params,
                                              const OnlineProfileParams& params) {
  OnlineProfileResult out;
  if (!(params.min_ratio > 0) || !(params.max_ratio >= params.min_ratio)) {
    out.error = "online profile bounds must satisfy 0 < min_ratio <= max_ratio";
    return out;
  }
  if (measured.empty()) {
    out.error = "no stage measurements";
    return out;
  }
  const auto layout = predict_pipeline(model, running);
  if (layout.layers_per_stage.size() != static_cast<size_t>(running.pp)) {
    out.error = "the running layout is not a valid pipeline for this model: " +
                layout.infeasible_reason;
    return out;
  }
  const int p = running.pp;
  // Cost units per stage, as predict_pipeline counts them.
  std::vector<double> units(p, 0.0);
  int first = 0;
  for (int s = 0; s < p; ++s) {
    const int n = layout.layers_per_stage[s];
    for (int i = first; i < first + n; ++i)
      units[s] += i < model.transformer_layers ? 1.0 : model.extra_layer_cost_factor;
    units[s] += ((s == 0 ? 1 : 0) + (s == p - 1 ? 1 : 0)) * model.embedding_cost_factor;
    first += n;
  }
  std::vector<double> fwd(p, 0.0), bwd(p, 0.0);
  std::vector<int> ranks(p, 0);
  for (const auto& m : measured) {
    if (m.stage < 0 || m.stage >= p) {
      out.error = "measurement for stage " + std::to_string(m.stage) + " but the job runs PP " +
                  std::to_string(p);
      return out;
    }
    const double f = mean_of(m.forward_seconds), b = mean_of(m.backward_seconds);
    if (f < 0 || b < 0) {
      out.error = "stage " + std::to_string(m.stage) +
                  ": forward and backward seconds must be non-empty, positive and finite";
      return out;
    }
    fwd[m.stage] += f;
    bwd[m.stage] += b;
    ++ranks[m.stage];
  }
  double measured_f = 0, measured_b = 0, predicted_f = 0, predicted_b = 0;
  for (int s = 0; s < p; ++s) {
    if (ranks[s] == 0 || units[s] <= 0) continue;  // stages nobody reported are left out
    measured_f += fwd[s] / ranks[s];
    measured_b += bwd[s] / ranks[s];
    predicted_f += units[s] * model.layer_fwd_s;
    predicted_b += units[s] * model.layer_bwd_s;
  }
  if (!(predicted_f > 0) || !(predicted_b > 0)) {
    out.error = "the model predicts no compute for the measured stages";
    return out;
  }
  out.raw_forward_ratio = measured_f / predicted_f;
  out.raw_backward_ratio = measured_b / predicted_b;
  out.forward_ratio = std::clamp(out.raw_forward_ratio, params.min_ratio, params.max_ratio);
  out.backward_ratio = std::clamp(out.raw_backward_ratio, params.min_ratio, params.max_ratio);
  out.clamped = out.forward_ratio != out.raw_forward_ratio ||
                out.backward_ratio != out.raw_backward_ratio;
  ElasticModel folded = model;
  folded.layer_fwd_s *= out.forward_ratio;
  folded.layer_bwd_s *= out.backward_ratio;
  auto built = build_scale_table(folded, table_params);
  if (built.table) out.table = std::move(*built.table);
  else out.table_error = built.error;
  out.model = std::move(folded);
  return out;
}

std::optional<StageMeasurement> stage_measurement_from_progress_line(std::string_view line,
                                                                     std::string* error) {
  auto step = parse_step_line(line, error);
  if (!step) return std::nullopt;
  return StageMeasurement{step->stage, std::move(step->forward_seconds),
                          std::move(step->backward_seconds)};
}

}  // namespace flotilla::scaler
