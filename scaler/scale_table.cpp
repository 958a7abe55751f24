#include "scaler/scale_table.h"

#include <algorithm>
#include <limits>
#include <map>

#include "scaler/modeling_predictor.h"

namespace flotilla::scaler {

const ScaleEntry* ScaleTable::best_within(int max_gpus, int min_gpus) const {
  const ScaleEntry* best = nullptr;
  for (const auto& e : entries) {
    if (e.gpus < min_gpus || e.gpus > max_gpus) continue;
    if (!best || e.speedup > best->speedup) best = &e;
  }
  return best;
}

const ScaleEntry* ScaleTable::find(int gpus) const {
  for (const auto& e : entries)
    if (e.gpus == gpus) return &e;
  return nullptr;
}

double ScaleTable::speedup_at(int gpus) const {
  const auto* e = find(gpus);
  return e ? e->speedup : 0.0;
}

ScaleTableResult build_scale_table(const ElasticModel& model, const ScaleTableParams& params,
                                   const IterationPredictor& predictor_in) {
  ScaleTableResult out;
  if (auto bad = model.validate(); !bad.empty()) {
    out.error = bad;
    return out;
  }
  const IterationPredictor predictor =
      predictor_in ? predictor_in
                   : IterationPredictor([&model](const ParallelConfig& c) {
                       return predict_pipeline(model, c);
                     });
  const ParallelConfig initial = model.initial;
  const int L = model.pipeline_layers();
  const double layer_s = model.layer_fwd_s + model.layer_bwd_s;

  const auto base = predictor(initial);
  if (!base.feasible) {
    out.error = "model " + model.name + ": initial layout " + initial.to_string() +
                " is infeasible: " + base.infeasible_reason;
    return out;
  }
  const auto base_model = modeled_iteration_s(L, model.global_batch, initial.dp, initial.pp, layer_s);
  if (!base_model) {
    out.error = "model " + model.name + ": initial layout " + initial.to_string() +
                " is infeasible by hyper-parameters";
    return out;
  }
  // Clamped before the cast: a huge cap_factor would overflow int (undefined behaviour).
  const int cap = params.cap_gpus > 0
                      ? params.cap_gpus
                      : static_cast<int>(std::min(params.cap_factor * initial.gpus() + 0.5,
                                                  double{std::numeric_limits<int>::max()}));

  std::vector<int> dps;
  if (params.consistency == Consistency::strict) {
    dps = {initial.dp};
  } else {
    for (int d = 1; d <= model.global_batch; ++d)
      if (model.global_batch % d == 0) dps.push_back(d);
  }
  std::map<int, ScaleCandidate> best_per_count;
  for (int d : dps) {
    for (int p = 1; p <= L; ++p) {
      ParallelConfig c{d, p, initial.tp, initial.cp};
      if (c.gpus() > cap) break;
      const auto pred = predictor(c);
      if (!pred.feasible) continue;
      const auto mod = modeled_iteration_s(L, model.global_batch, d, p, layer_s);
      if (!mod) continue;
      ScaleCandidate cand{c.gpus(), c, pred.iteration_s, *mod, base.iteration_s / pred.iteration_s,
                          *base_model / *mod};
      auto it = best_per_count.find(c.gpus());
      if (it == best_per_count.end() || cand.iteration_s < it->second.iteration_s)
        best_per_count[c.gpus()] = cand;
    }
  }
  ScaleTable table;
  table.initial = initial;
  table.cap_gpus = cap;
  std::vector<ScaleCandidate> above;
  for (const auto& [gpus, cand] : best_per_count) {
    if (gpus < initial.gpus()) table.entries.push_back(cand);
    if (gpus > initial.gpus()) above.push_back(cand);
  }
  table.entries.push_back(
      ScaleCandidate{initial.gpus(), initial, base.iteration_s, *base_model, 1.0, 1.0});
  FilteredCandidates filtered;
  if (params.filter_above_initial) filtered = filter_scale_candidates(above, params.filter);
  else filtered.kept = above;
  for (auto& c : filtered.kept) table.entries.push_back(c);
  table.rejected = std::move(filtered.rejected);
  out.table = std::move(table);
  return out;
}

}  // namespace flotilla::scaler
