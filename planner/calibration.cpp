#include "planner/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace flotilla::planner {

std::vector<EfficiencyFit> fit_compute_efficiency(const ProfileSet& profiles, const GpuCatalog& catalog,
                                                  int seq_len) {
  struct Acc {
    double log_sum = 0;
    int n = 0;
  };
  std::map<std::string, Acc> by_gpu;
  const auto model_of = [&](const GpuProfile& p) {
    auto m = find_preset(p.model);
    if (m && seq_len > 0) m->seq_len = seq_len;
    return m;
  };
  for (const GpuProfile& p : profiles.all()) {
    const GpuType* g = catalog.find(p.gpu);
    auto m = model_of(p);
    if (g == nullptr || !m) continue;
    for (const auto& [tp, fits] : p.fit_by_tp) {
      if (fits.size() < 2) continue;
      const double per_sample_s = fits[1].per_sample.forward_s + fits[1].per_sample.backward_s;
      if (per_sample_s <= 0) continue;
      const double flops = 3.0 * block_forward_flops(*m, 1, m->seq_len) / tp;
      by_gpu[g->name].log_sum += std::log(flops / (per_sample_s * g->peak_bf16_tflops * 1e12));
      ++by_gpu[g->name].n;
    }
  }
  std::vector<EfficiencyFit> out;
  for (const auto& [name, acc] : by_gpu) {
    EfficiencyFit f;
    f.gpu = name;
    f.efficiency = std::exp(acc.log_sum / acc.n);
    GpuType g = *catalog.find(name);
    g.compute_efficiency = f.efficiency;
    double sum = 0, sum8 = 0;
    int n8 = 0;
    for (const GpuProfile& p : profiles.all()) {
      const GpuType* pg = catalog.find(p.gpu);
      auto m = model_of(p);
      if (pg == nullptr || pg->name != name || !m) continue;
      for (const auto& [mbs, by_tp] : p.by_mbs_tp) {
        for (const auto& [tp, times] : by_tp) {
          if (times.size() < 2) continue;
          const double measured = times[1].forward_s + times[1].backward_s;
          if (measured <= 0) continue;
          const LayerTimes est = ComputeModel::estimate_block_times(*m, g, 1, tp, mbs);
          const double err = std::abs(est.forward_s + est.backward_s - measured) / measured;
          sum += err;
          f.max_rel_error = std::max(f.max_rel_error, err);
          ++f.entries;
          if (mbs >= 8) {
            sum8 += err;
            ++n8;
          }
        }
      }
    }
    f.mean_rel_error = f.entries ? sum / f.entries : 0;
    f.mean_rel_error_mbs8 = n8 ? sum8 / n8 : 0;
    out.push_back(f);
  }
  return out;
}

}  // namespace flotilla::planner
