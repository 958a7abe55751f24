#include "planner/marp.h"

#include <algorithm>

namespace flotilla::planner {

MarpInput marp_input(const ModelSpec& m, int batch_size) {
  MarpInput in;
  in.s = m.seq_len;
  in.b = batch_size;
  in.h = m.hidden;
  in.l = m.num_layers;
  in.a = m.heads;
  in.V = m.vocab;
  return in;
}

double marp_weight_params(const MarpInput& in) { return in.V * in.h + in.l * (12 * in.h * in.h + 13 * in.h); }

double marp_required_bytes(const MarpInput& in, int d, int t) {
  const double W = marp_weight_params(in);
  return 20 * W / t + in.s * in.b * in.h * in.l * (10.0 / d + 24.0 / (d * t) + 5 * in.a * in.s / (d * in.h * t));
}

bool marp_fits(const MarpInput& in, int d, int t, double capacity_bytes) {
  return marp_required_bytes(in, d, t) < capacity_bytes;
}

std::vector<MarpPlan> marp_resource_plans(const MarpInput& in, double capacity_bytes, int max_gpus, int max_tp) {
  std::vector<MarpPlan> plans;
  for (int t = 1; t <= max_tp; t *= 2) {
    for (int d = 1; d * t <= max_gpus; ++d) {
      const long long b = static_cast<long long>(in.b);
      if (b % d != 0) continue;  // b = B / d must be whole
      const double need = marp_required_bytes(in, d, t);
      if (need < capacity_bytes) plans.push_back({d, t, d * t, need});
    }
  }
  std::sort(plans.begin(), plans.end(), [](const MarpPlan& x, const MarpPlan& y) {
    if (x.gpus != y.gpus) return x.gpus < y.gpus;
    if (x.t != y.t) return x.t < y.t;
    return x.required_bytes < y.required_bytes;
  });
  return plans;
}

}  // namespace flotilla::planner
