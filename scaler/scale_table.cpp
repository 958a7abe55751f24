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

namespace {

// The predictor's split as blocks: predict_pipeline() splits the L pipeline layers (embedding
// on the first stage, head on the last); the planner-backed predictor splits all L+2 blocks.
// A predictor that gives no split gets the layers balanced evenly.
std::vector<int> block_split(const PipelinePrediction& prediction, int layers, int stages) {
  std::vector<int> split = prediction.layers_per_stage;
  int covered = 0;
  for (int n : split) covered += n;
  if (static_cast<int>(split.size()) == stages && covered == layers + 2) return split;
  if (static_cast<int>(split.size()) != stages || covered != layers)
    split = balanced_split(std::vector<double>(layers, 1.0), stages, 0.0, 0.0);
  if (split.empty()) return split;
  split.front() += 1;  // embedding
  split.back() += 1;   // head
  return split;
}

ScaleEntry entry(const ScaleCandidate& candidate, std::vector<int> blocks, const std::string& gpu_type) {
  ScaleEntry e;
  static_cast<ScaleCandidate&>(e) = candidate;
  e.blocks_per_stage = std::move(blocks);
  e.tp_per_stage.assign(candidate.config.pp, candidate.config.tp);
  e.gpu_type_per_stage.assign(candidate.config.pp, gpu_type);
  return e;
}

}  // namespace

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
  std::map<int, std::vector<int>> blocks_per_count;  // the split of best_per_count's layout
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
      if (it == best_per_count.end() || cand.iteration_s < it->second.iteration_s) {
        best_per_count[c.gpus()] = cand;
        blocks_per_count[c.gpus()] = block_split(pred, L, p);
      }
    }
  }
  ScaleTable table;
  table.initial = initial;
  table.cap_gpus = cap;
  std::vector<ScaleCandidate> above;
  for (const auto& [gpus, cand] : best_per_count) {
    if (gpus < initial.gpus()) table.entries.push_back(entry(cand, blocks_per_count[gpus], params.gpu_type));
    if (gpus > initial.gpus()) above.push_back(cand);
  }
  table.entries.push_back(entry(ScaleCandidate{initial.gpus(), initial, base.iteration_s, *base_model, 1.0, 1.0},
                                block_split(base, L, initial.pp), params.gpu_type));
  FilteredCandidates filtered;
  if (params.filter_above_initial) filtered = filter_scale_candidates(above, params.filter);
  else filtered.kept = above;
  for (auto& c : filtered.kept) table.entries.push_back(entry(c, blocks_per_count[c.gpus], params.gpu_type));
  table.rejected = std::move(filtered.rejected);
  out.table = std::move(table);
  return out;
}

}  // namespace flotilla::scaler
