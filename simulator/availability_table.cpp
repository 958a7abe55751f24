#include "simulator/availability_table.h"

#include <algorithm>

namespace flotilla::simulator {

// The scaler's pure core, which this shell drives.
using scaler::Consistency;
using scaler::ElasticModel;
using scaler::ParallelConfig;
using scaler::PlannerJob;
using scaler::ScaleTableParams;
using scaler::build_scale_table;
using scaler::make_planner_predictor;

AvailabilityTable build_availability_table(const PlannerJob& job_in, int max_gpus,
                                           Consistency consistency) {
  AvailabilityTable out;
  if (max_gpus < 1) {
    out.error = "the trace never offers a GPU: nothing to plan";
    return out;
  }
  if (job_in.global_batch < 1) {
    out.error = "global batch must be >= 1";
    return out;
  }
  PlannerJob job = job_in;
  const int tp = std::max(1, job.initial.tp);
  job.initial = {1, 1, tp, 1};
  const auto pp = make_planner_predictor(job);
  if (!pp.error.empty()) {
    out.error = pp.error;
    return out;
  }
  ElasticModel em = pp.elastic_model;
  const int L = em.pipeline_layers();
  // The smallest feasible layout: fewest GPUs, then fewest stages (PP goes first on a shrink).
  std::optional<ParallelConfig> initial;
  std::string last_reason;
  for (int g = tp; g <= max_gpus && !initial; g += tp) {
    for (int pp_deg = 1; pp_deg <= L && !initial; ++pp_deg) {
      if ((g / tp) % pp_deg != 0) continue;
      const ParallelConfig c{g / tp / pp_deg, pp_deg, tp, 1};
      if (job.global_batch % c.dp != 0) continue;
      const auto pred = pp.predictor(c);
      if (pred.feasible) initial = c;
      else last_reason = pred.infeasible_reason;
    }
  }
  if (!initial) {
    out.error = "no layout of " + job.model.name + " on " + job.gpu_type + " fits on " +
                std::to_string(max_gpus) + " GPUs or fewer" +
                (last_reason.empty() ? std::string() : " (last: " + last_reason + ")");
    return out;
  }
  em.initial = *initial;
  ScaleTableParams params;
  params.consistency = consistency;
  params.cap_gpus = max_gpus;
  params.filter_above_initial = false;
  auto r = build_scale_table(em, params, pp.predictor);
  if (!r.table) {
    out.error = r.error;
    return out;
  }
  out.table = std::move(r.table);
  out.model = em;
  return out;
}

AvailabilityTable choose_availability_table(PlannerJob job, int max_gpus, Consistency consistency,
                                            int tp, int node_gpus) {
  AvailabilityTable best;
  const int largest_tp = tp > 0 ? tp : std::min(node_gpus, max_gpus);
  for (int t = tp > 0 ? tp : 1; t <= largest_tp; t *= 2) {
    if (best.table && best.table->entries.front().gpus <= t) break;
    job.initial.tp = t;
    auto tried = build_availability_table(job, max_gpus, consistency);
    const bool fewer = tried.table && (!best.table || tried.table->entries.front().gpus <
                                                           best.table->entries.front().gpus);
    if (fewer || (!best.table && best.error.empty())) best = std::move(tried);
  }
  if (!best.table && tp == 0 && node_gpus > 1)
    best.error += " (also tried TP 2 to " + std::to_string(std::min(node_gpus, max_gpus)) + ")";
  return best;
}

}  // namespace flotilla::simulator
