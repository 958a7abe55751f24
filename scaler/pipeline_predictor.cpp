#include "scaler/pipeline_predictor.h"

#include <algorithm>
#include <limits>

namespace flotilla::scaler {

std::vector<int> balanced_split(const std::vector<double>& costs, int parts, double first_extra,
                                double last_extra) {
  const int n = static_cast<int>(costs.size());
  if (parts < 1 || parts > n) return {};
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[k][j]: minimal max-stage cost splitting the first j layers into k stages.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0.0;
  for (int k = 1; k <= parts; ++k) {
    for (int j = k; j <= n - (parts - k); ++j) {
      for (int i = k - 1; i < j; ++i) {
        if (best[k - 1][i] == inf) continue;
        double stage = prefix[j] - prefix[i];
        if (k == 1) stage += first_extra;
        if (k == parts) stage += last_extra;
        const double cand = std::max(best[k - 1][i], stage);
        if (cand < best[k][j]) {
          best[k][j] = cand;
          cut[k][j] = i;
        }
      }
    }
  }
  std::vector<int> layers(parts);
  int j = n;
  for (int k = parts; k >= 1; --k) {
    const int i = cut[k][j];
    layers[k - 1] = j - i;
    j = i;
  }
  return layers;
}

PipelinePrediction predict_pipeline(const ElasticModel& model, const ParallelConfig& config) {
  PipelinePrediction out;
  const int L = model.pipeline_layers();
  const int p = config.pp;
  if (config.dp < 1 || p < 1 || config.tp < 1 || config.cp < 1) {
    out.infeasible_reason = "parallel degrees must be >= 1";
    return out;
  }
  if (p > L) {
    out.infeasible_reason = "PP " + std::to_string(p) + " exceeds the " + std::to_string(L) +
                            " pipeline layers";
    return out;
  }
  if (model.global_batch % config.dp != 0) {
    out.infeasible_reason = "global batch " + std::to_string(model.global_batch) +
                            " is not divisible by DP " + std::to_string(config.dp);
    return out;
  }
  const long long m = model.global_batch / config.dp;
  const double layer_s = model.layer_fwd_s + model.layer_bwd_s;
  std::vector<double> costs(L, layer_s);
  for (int i = model.transformer_layers; i < L; ++i) costs[i] = layer_s * model.extra_layer_cost_factor;
  const double edge_s = layer_s * model.embedding_cost_factor;
  out.layers_per_stage = balanced_split(costs, p, edge_s, p == 1 ? 0.0 : edge_s);
  if (p == 1) out.layers_per_stage = {L};

  double sum_stage_s = 0, max_stage_s = 0;
  double max_stage_grad_bytes = 0;
  int first = 0;
  out.peak_bytes_per_stage.assign(p, 0.0);
  std::string oom;
  for (int s = 0; s < p; ++s) {
    const int n = out.layers_per_stage[s];
    double stage_s = 0;
    for (int i = first; i < first + n; ++i) stage_s += costs[i];
    int edges = (s == 0 ? 1 : 0) + (s == p - 1 ? 1 : 0);
    stage_s += edges * edge_s;
    sum_stage_s += stage_s;
    max_stage_s = std::max(max_stage_s, stage_s);
    max_stage_grad_bytes = std::max(max_stage_grad_bytes, n * model.layer_grad_bytes);
    const long long in_flight = std::min<long long>(p - s, m);
    const double peak = n * model.layer_static_bytes + edges * model.embedding_static_bytes +
                        static_cast<double>(in_flight) * n * model.layer_activation_bytes;
    out.peak_bytes_per_stage[s] = peak;
    if (peak > model.gpu_memory_bytes && oom.empty()) {
      oom = "stage " + std::to_string(s) + " needs " + std::to_string(peak / 1e9).substr(0, 6) +
            " GB > " + std::to_string(model.gpu_memory_bytes / 1e9).substr(0, 6) + " GB per GPU";
    }
    first += n;
  }
  out.iteration_s = sum_stage_s + static_cast<double>(m - 1) * max_stage_s + 2.0 * (p - 1) * model.p2p_s;
  if (config.dp > 1) {
    out.iteration_s += 2.0 * (config.dp - 1) / config.dp * max_stage_grad_bytes / model.dp_bytes_per_s;
  }
  if (!oom.empty()) {
    out.infeasible_reason = "out of memory: " + oom;
    return out;
  }
  out.feasible = true;
  return out;
}

}  // namespace flotilla::scaler
