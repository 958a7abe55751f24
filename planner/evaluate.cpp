#include "planner/evaluate.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace flotilla::planner {
namespace {

std::string gb(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

Evaluation evaluate(const Plan& plan, const ModelSpec& model, const EvalContext& ctx) {
  Evaluation ev;
  if (std::string err = validate_plan(plan, model.num_blocks()); !err.empty()) {
    ev.infeasible = Infeasibility{InfeasibleKind::kInvalidPlan, -1, -1, 0, 0, "invalid plan: " + err};
    return ev;
  }
  if (ctx.catalog == nullptr || ctx.compute == nullptr || ctx.network == nullptr) {
    ev.infeasible = Infeasibility{InfeasibleKind::kInvalidPlan, -1, -1, 0, 0, "evaluate() needs a catalog, compute model and network"};
    return ev;
  }
  const int p = plan.num_stages();
  std::vector<std::vector<const GpuType*>> gpus(static_cast<std::size_t>(p));
  for (int s = 0; s < p; ++s) {
    for (const Replica& r : plan.stages[static_cast<std::size_t>(s)].replicas) {
      const GpuType* g = ctx.catalog->find(r.gpu_type);
      if (g == nullptr) {
        ev.infeasible = Infeasibility{InfeasibleKind::kUnknownGpu, s, -1, 0, 0,
                                      "unknown GPU type '" + r.gpu_type + "' in stage " + std::to_string(s) +
                                          "; add it to the GPU catalog (override file)"};
        return ev;
      }
      gpus[static_cast<std::size_t>(s)].push_back(g);
    }
  }
  const int m = plan.num_micro_batches();
  ev.num_micro_batches = m;
  std::vector<StageTiming> timings;
  int rank = 0;
  double usd_per_second = 0;
  double cross_zone_usd = 0;
  for (int s = 0; s < p; ++s) {
    const Stage& st = plan.stages[static_cast<std::size_t>(s)];
    const auto& sg = gpus[static_cast<std::size_t>(s)];
    StageShape shape{st.first_block, st.last_block, st.tp, st.dp(), plan.micro_batch_size,
                     in_flight_micro_batches(s, p, m), plan.options};
    const MemoryBreakdown mem = stage_memory(model, shape, ctx.memory_constants);
    StageReport report{s, st.first_block, st.last_block, st.tp, st.dp(), shape.in_flight_micro_batches, 0, {}};
    for (int r = 0; r < st.dp(); ++r) {
      const GpuType& g = *sg[static_cast<std::size_t>(r)];
      usd_per_second += g.usd_per_hour * st.tp / 3600.0;
      for (int k = 0; k < st.tp; ++k) {
        RankReport rr{rank, s, r, k, g.name, st.replicas[static_cast<std::size_t>(r)].zone, mem, g.memory_bytes};
        const std::int64_t peak = rank_peak_bytes(mem, g.runtime_overhead_bytes);
        rr.memory.overhead_bytes += g.runtime_overhead_bytes;
        rr.memory.peak_bytes = peak;
        report.peak_bytes = std::max(report.peak_bytes, peak);
        ev.peak_bytes_max = std::max(ev.peak_bytes_max, peak);
        if (peak > g.memory_bytes && !ev.infeasible) {
          ev.infeasible = Infeasibility{InfeasibleKind::kOutOfMemory, s, rank, peak, g.memory_bytes,
                                        "OOM on rank " + std::to_string(rank) + " (stage " + std::to_string(s) + ", " +
                                            g.name + "): peak " + gb(peak) + " > capacity " + gb(g.memory_bytes)};
        }
        ev.ranks.push_back(std::move(rr));
        ++rank;
      }
    }
    // Links: stage s replica r sends to stage s+1 replica r; DP peers ring within the stage.
    LinkKind to_next = LinkKind::kInterNode;
    if (s + 1 < p) {
      const Stage& nx = plan.stages[static_cast<std::size_t>(s + 1)];
      for (int r = 0; r < st.dp(); ++r) {
        const LinkKind l = ctx.network->link_between(st.replicas[static_cast<std::size_t>(r)].zone,
                                                     nx.replicas[static_cast<std::size_t>(r)].zone, false);
        to_next = std::max(to_next, l);
        const double bytes = 2.0 * 2.0 * model.seq_len * static_cast<double>(plan.micro_batch_size) * model.hidden * m;
        cross_zone_usd += bytes * ctx.network->usd_per_byte(st.replicas[static_cast<std::size_t>(r)].zone,
                                                            nx.replicas[static_cast<std::size_t>(r)].zone);
      }
    }
    std::set<std::string> zones;
    for (const Replica& r : st.replicas) zones.insert(r.zone);
    LinkKind dp_link = LinkKind::kInterNode;
    if (st.dp() > 1 && st.tp * st.dp() <= sg.front()->gpus_per_node && zones.size() == 1) dp_link = LinkKind::kIntraNode;
    for (int r = 0; r + 1 < st.dp(); ++r) {
      dp_link = std::max(dp_link, ctx.network->link_between(st.replicas[static_cast<std::size_t>(r)].zone,
                                                             st.replicas[static_cast<std::size_t>(r + 1)].zone, false));
    }
    if (zones.size() > 1) {
      // A ring over the replicas crosses zone boundaries `zones.size()` times (at least twice);
      // each crossing carries 2(n-1)/n of every TP rank's fp32 gradients.
      const double grad_bytes = 4.0 * static_cast<double>(stage_params_per_rank(model, st.first_block, st.last_block, st.tp));
      const double n = st.dp();
      const double per_link = 2.0 * (n - 1) / n * grad_bytes * st.tp;
      double usd_per_byte = 0;
      for (const Replica& a : st.replicas) {
        for (const Replica& b : st.replicas) usd_per_byte = std::max(usd_per_byte, ctx.network->usd_per_byte(a.zone, b.zone));
      }
      cross_zone_usd += per_link * static_cast<double>(zones.size()) * usd_per_byte;
    }
    report.timing = stage_timing(model, st, sg, plan.micro_batch_size, plan.options, *ctx.compute, *ctx.network,
                                 to_next, dp_link);
    timings.push_back(report.timing);
    ev.stages.push_back(report);
  }
  const PipelineTime pt = pipeline_iter_seconds(timings, m);
  ev.iter_seconds = pt.iter_seconds;
  ev.pipeline_seconds = pt.pipeline_seconds;
  ev.sync_seconds = pt.sync_seconds;
  ev.tokens_per_second = ev.iter_seconds > 0
                             ? static_cast<double>(plan.global_batch_size) * model.seq_len / ev.iter_seconds
                             : 0.0;
  ev.usd_compute_per_iteration = usd_per_second * ev.iter_seconds;
  ev.usd_network_per_iteration = cross_zone_usd;
  ev.usd_per_iteration = ev.usd_compute_per_iteration + ev.usd_network_per_iteration;
  return ev;
}

}  // namespace flotilla::planner
