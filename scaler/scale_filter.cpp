#include "scaler/scale_filter.h"

#include <cmath>
#include <cstdio>

namespace flotilla::scaler {

namespace {
int trend(double now, double before) {
  constexpr double eps = 1e-9;
  if (now > before + eps) return 1;
  if (now < before - eps) return -1;
  return 0;
}
std::string fmt(const char* what, double a, double b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s (sim %.3f, model %.3f)", what, a, b);
  return buf;
}
}  // namespace

FilteredCandidates filter_scale_candidates(const std::vector<ScaleCandidate>& ascending,
                                           const ScaleFilterParams& params) {
  FilteredCandidates out;
  double prev_sim = 1.0, prev_model = 1.0, last_kept = 1.0;
  for (const auto& c : ascending) {
    const int sim_trend = trend(c.speedup, prev_sim);
    const int model_trend = trend(c.modeled_speedup, prev_model);
    prev_sim = c.speedup;
    prev_model = c.modeled_speedup;
    if (sim_trend != model_trend) {
      out.rejected.push_back({c, fmt("trend: predictors disagree on direction", c.speedup,
                                     c.modeled_speedup)});
      continue;
    }
    if (!(c.modeled_speedup > 0) ||
        std::fabs(c.speedup - c.modeled_speedup) / c.modeled_speedup >
            params.max_relative_discrepancy) {
      out.rejected.push_back({c, fmt("discrepancy: predictors too far apart", c.speedup,
                                     c.modeled_speedup)});
      continue;
    }
    if (c.speedup < (1.0 + params.min_marginal_gain) * last_kept) {
      out.rejected.push_back({c, fmt("marginal: too little gain over the last kept entry",
                                     c.speedup, c.modeled_speedup)});
      continue;
    }
    out.kept.push_back(c);
    last_kept = c.speedup;
  }
  return out;
}

}  // namespace flotilla::scaler
