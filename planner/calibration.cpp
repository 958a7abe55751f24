#include "planner/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/runtime_overhead.h"

namespace flotilla::planner {

std::vector<EfficiencyFit> fit_compute_efficiency(const ProfileSet& profiles, const GpuCatalog& catalog, int seq_len) {
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

namespace {

// Solves the square system a x = b in place (Gaussian elimination, partial pivoting); false
// when it is singular.
bool solve(std::vector<std::vector<double>>& a, std::vector<double>& b) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double k = a[r][c] / a[c][c];
      for (std::size_t j = c; j < n; ++j) a[r][j] -= k * a[c][j];
      b[r] -= k * b[c];
    }
  }
  for (std::size_t c = 0; c < n; ++c) b[c] /= a[c][c];
  return true;
}

// One run as a row of the linear model: relative residual = row . x - target, unknowns
// x = [fraction (when fitted), context per GPU type].
struct Row {
  std::vector<double> a;
  double target = 0;
};

std::vector<Row> rows_of(const std::vector<const MemoryFitSample*>& runs, const std::vector<std::string>& gpus,
                         bool fit_fraction) {
  std::vector<Row> rows;
  const std::size_t off = fit_fraction ? 1 : 0;
  for (const MemoryFitSample* s : runs) {
    Row r;
    r.a.assign(gpus.size() + off, 0);
    if (fit_fraction) r.a[0] = s->dynamic_bytes / s->measured_bytes;
    for (std::size_t g = 0; g < gpus.size(); ++g)
      if (gpus[g] == s->gpu) r.a[off + g] = 1.0 / s->measured_bytes;
    r.target = (s->measured_bytes - s->modelled_bytes) / s->measured_bytes;
    rows.push_back(std::move(r));
  }
  return rows;
}

double dot(const std::vector<double>& a, const std::vector<double>& x) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += a[i] * x[i];
  return d;
}

// Least squares with the rows in `active` held at residual -bound (KKT system); false when singular.
bool solve_with_active(const std::vector<Row>& rows, const std::vector<std::size_t>& active, double bound,
                       std::vector<double>& x) {
  const std::size_t n = rows.front().a.size();
  const std::size_t m = active.size();
  std::vector<std::vector<double>> k(n + m, std::vector<double>(n + m, 0));
  std::vector<double> rhs(n + m, 0);
  for (const Row& r : rows)
    for (std::size_t i = 0; i < n; ++i) {
      rhs[i] += r.a[i] * r.target;
      for (std::size_t j = 0; j < n; ++j) k[i][j] += r.a[i] * r.a[j];
    }
  for (std::size_t c = 0; c < m; ++c) {
    const Row& r = rows[active[c]];
    for (std::size_t i = 0; i < n; ++i) k[n + c][i] = k[i][n + c] = r.a[i];
    rhs[n + c] = r.target - bound;
  }
  if (!solve(k, rhs)) return false;
  x.assign(rhs.begin(), rhs.begin() + static_cast<std::ptrdiff_t>(n));
  return true;
}

// Least squares subject to every residual >= -bound (no run under-predicted by more than the
// bound): the unconstrained solution if it obeys, else the best feasible solution with up to n
// constraints active (enumerated; n is 1 + the number of GPU types, the runs a few dozen).
std::vector<double> constrained_least_squares(const std::vector<Row>& rows, double bound) {
  const std::size_t n = rows.front().a.size();
  const auto feasible = [&](const std::vector<double>& x) {
    for (const Row& r : rows)
      if (dot(r.a, x) - r.target < -bound - 1e-9) return false;
    return true;
  };
  const auto cost = [&](const std::vector<double>& x) {
    double c = 0;
    for (const Row& r : rows) c += (dot(r.a, x) - r.target) * (dot(r.a, x) - r.target);
    return c;
  };
  std::vector<double> best;
  if (solve_with_active(rows, {}, bound, best) && feasible(best)) return best;
  best.clear();
  double best_cost = 0;
  std::vector<std::size_t> active;
  const auto visit = [&](auto&& self, std::size_t from) -> void {
    if (!active.empty()) {
      std::vector<double> x;
      if (solve_with_active(rows, active, bound, x) && feasible(x) && (best.empty() || cost(x) < best_cost)) {
        best = x;
        best_cost = cost(x);
      }
    }
    if (active.size() == n) return;
    for (std::size_t i = from; i < rows.size(); ++i) {
      active.push_back(i);
      self(self, i + 1);
      active.pop_back();
    }
  };
  visit(visit, 0);
  return best;
}

MemoryOverheadFit fit_with(const std::vector<const MemoryFitSample*>& runs, const std::vector<std::string>& gpus,
                           bool fit_fraction, double bound) {
  MemoryOverheadFit fit;
  fit.samples = static_cast<int>(runs.size());
  const std::vector<Row> rows = rows_of(runs, gpus, fit_fraction);
  if (rows.empty() || rows.front().a.empty()) return fit;
  const std::vector<double> x = constrained_least_squares(rows, bound);
  if (x.empty()) return fit;
  const std::size_t off = fit_fraction ? 1 : 0;
  if (fit_fraction) fit.allocator_fraction = x[0];
  for (std::size_t g = 0; g < gpus.size(); ++g) fit.cuda_context_bytes[gpus[g]] = x[off + g];
  return fit;
}

}  // namespace

MemoryOverheadFit fit_memory_overheads(const std::vector<MemoryFitSample>& samples, int min_runs_per_gpu,
                                       double max_under_prediction) {
  std::map<std::string, int> runs_per_gpu;
  for (const MemoryFitSample& s : samples)
    if (!s.gpu.empty()) ++runs_per_gpu[s.gpu];
  std::vector<std::string> gpus;
  for (const auto& [gpu, n] : runs_per_gpu)
    if (n >= min_runs_per_gpu) gpus.push_back(gpu);
  std::vector<const MemoryFitSample*> runs;
  for (const MemoryFitSample& s : samples) {
    if (s.measured_bytes <= 0) continue;
    if (s.gpu.empty() || std::find(gpus.begin(), gpus.end(), s.gpu) != gpus.end()) runs.push_back(&s);
  }
  if (runs.size() < 2) return MemoryOverheadFit{};
  MemoryOverheadFit fit = fit_with(runs, gpus, true, max_under_prediction);
  // A negative fraction is not an allocator: pin it at 0 and refit the contexts alone.
  if (fit.allocator_fraction < 0) fit = fit_with(runs, gpus, false, max_under_prediction);
  return fit;
}

double predicted_bytes(const MemoryFitSample& s, const MemoryOverheadFit& fit, double fallback_context_bytes) {
  double context = 0;
  if (!s.gpu.empty()) {
    const auto it = fit.cuda_context_bytes.find(s.gpu);
    context = it != fit.cuda_context_bytes.end() ? it->second : fallback_context_bytes;
  }
  return s.modelled_bytes + fit.allocator_fraction * s.dynamic_bytes + context;
}

MemoryFitSample memory_fit_sample(const Evaluation& ev, double measured_bytes, std::string group) {
  MemoryFitSample out;
  out.group = std::move(group);
  out.measured_bytes = measured_bytes;
  const RankReport* worst = nullptr;
  for (const RankReport& r : ev.ranks)
    if (worst == nullptr || r.memory.peak_bytes > worst->memory.peak_bytes) worst = &r;
  if (worst == nullptr) return out;
  const RuntimeOverhead& runtime = worst->runtime;
  const double fragmentation = static_cast<double>(worst->memory.overhead_bytes - runtime.total_bytes());
  out.gpu = worst->gpu_type;  // the catalog's name
  out.dynamic_bytes = static_cast<double>(worst->memory.activations_bytes + worst->memory.transient_bytes);
  out.modelled_bytes =
      static_cast<double>(worst->memory.peak_bytes) - fragmentation - static_cast<double>(runtime.cuda_context_bytes);
  return out;
}

}  // namespace flotilla::planner
