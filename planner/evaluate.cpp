#include "planner/evaluate.h"

#include "planner/runtime_overhead.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace flotilla::planner {
namespace {

std::string gb(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

// Replicas of `stage` with the GPU type and zone of `replica` (itself included): Megatron puts
// them on nodes contiguously, and their pipelines send at once (p2p_senders_per_node()).
int replicas_like(const Stage& stage, const Replica& replica) {
  int here = 0;
  for (const Replica& other : stage.replicas) here += other.gpu_type == replica.gpu_type && other.zone == replica.zone;
  return here;
}

// NetworkModel::pair_bandwidth_bytes_per_s() with its last answer kept: the replicas of a stage
// mostly share zone, GPU type and senders with the one before, and each look-up walks the
// name-ordered fits for every alias pair (~4 % of a 14,336-GPU search, evaluate() asking
// 2 x stages x D times per plan). Same function of the same arguments, so the same value.
class LastPairBandwidth {
 public:
  explicit LastPairBandwidth(const NetworkModel& network) : network_(network) {}
  double operator()(std::string_view zone_a, const GpuType& gpu_a, std::string_view zone_b, const GpuType& gpu_b,
                    int gpus_per_node, double message_bytes) {
    if (!valid_ || zone_a != zone_a_ || zone_b != zone_b_ || &gpu_a != gpu_a_ || &gpu_b != gpu_b_ ||
        gpus_per_node != gpus_per_node_ || message_bytes != message_bytes_) {
      value_ = network_.pair_bandwidth_bytes_per_s(zone_a, gpu_a, zone_b, gpu_b, gpus_per_node, message_bytes);
      zone_a_ = zone_a;
      zone_b_ = zone_b;
      gpu_a_ = &gpu_a;
      gpu_b_ = &gpu_b;
      gpus_per_node_ = gpus_per_node;
      message_bytes_ = message_bytes;
      valid_ = true;
    }
    return value_;
  }

 private:
  const NetworkModel& network_;
  bool valid_ = false;
  std::string_view zone_a_, zone_b_;  // the plan's own strings, alive for the whole evaluate()
  const GpuType* gpu_a_ = nullptr;
  const GpuType* gpu_b_ = nullptr;
  int gpus_per_node_ = 0;
  double message_bytes_ = 0;
  double value_ = 0;
};

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
  // Sailor: T_iter = max over pipelines (replica r of every stage) of T_pp + T_sync + T_update.
  // per_pipeline[r][s] is replica r's own timing of stage s (its GPU, its p2p hop).
  std::vector<std::vector<StageTiming>> per_pipeline(static_cast<std::size_t>(plan.dp()));
  int rank = 0;
  double usd_per_second = 0;
  double cross_zone_usd = 0;
  LastPairBandwidth p2p_bandwidth(*ctx.network), ring_bandwidth(*ctx.network);
  for (int s = 0; s < p; ++s) {
    const Stage& st = plan.stages[static_cast<std::size_t>(s)];
    const auto& sg = gpus[static_cast<std::size_t>(s)];
    const int in_flight = in_flight_micro_batches(s, p, m);
    // A replica's bytes depend on its TP degree and, through FlashAttention, on its GPU type;
    // each is checked against its own GPU's capacity.
    std::map<std::pair<int, bool>, MemoryBreakdown> memory_by_tp_flash;
    const auto memory_of = [&](int tp, bool supports_flash) -> const MemoryBreakdown& {
      const auto key = std::make_pair(tp, supports_flash);
      auto it = memory_by_tp_flash.find(key);
      if (it == memory_by_tp_flash.end()) {
        StageShape own{st.first_block, st.last_block, tp, st.dp(), plan.micro_batch_size, in_flight,
                       options_on_gpu(plan.options, supports_flash)};
        it = memory_by_tp_flash.emplace(key, stage_memory(model, own, ctx.memory_constants)).first;
      }
      return it->second;
    };
    StageReport report{s, st.first_block, st.last_block, st.tp, st.dp(), in_flight, 0, {}};
    int min_tp = st.replica_tp(0);
    bool one_type = true;
    for (int r = 0; r < st.dp(); ++r) {
      const GpuType& g = *sg[static_cast<std::size_t>(r)];
      const int tp_r = st.replica_tp(r);
      min_tp = std::min(min_tp, tp_r);
      one_type = one_type && &g == sg.front();
      const MemoryBreakdown& mem = memory_of(tp_r, g.supports_flash_attention);
      usd_per_second += g.usd_per_hour * tp_r / 3600.0;
      for (int k = 0; k < tp_r; ++k) {
        RankReport rr{rank, s, r, k, g.name, st.replicas[static_cast<std::size_t>(r)].zone, mem, g.memory_bytes};
        rr.runtime = runtime_overhead(
            g, stage_communicators(st.first_block, st.last_block, model.num_blocks(), tp_r, st.dp(), g.gpus_per_node));
        const std::int64_t peak = rank_peak_bytes(mem, rr.runtime.total_bytes());
        rr.memory.overhead_bytes += rr.runtime.total_bytes();
        rr.memory.peak_bytes = peak;
        report.peak_bytes = std::max(report.peak_bytes, peak);
        ev.peak_bytes_max = std::max(ev.peak_bytes_max, peak);
        if (peak > g.memory_bytes && !ev.infeasible) {
          ev.infeasible = Infeasibility{InfeasibleKind::kOutOfMemory, s, rank, peak, g.memory_bytes,
                                        "OOM on rank " + std::to_string(rank) + " (stage " + std::to_string(s) + ", " +
                                            g.name + (st.uniform_tp() ? "" : " TP" + std::to_string(tp_r)) +
                                            "): peak " + gb(peak) + " > capacity " + gb(g.memory_bytes)};
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
    // Replicas that share one node (Megatron orders ranks TP, then DP, then PP, so a stage's
    // tp*dp GPUs are contiguous) all-reduce over NVLink: only when they are of one GPU type and
    // TP, fill at most one node and sit in one zone. Otherwise the zone pair decides.
    LinkKind dp_link = LinkKind::kInterNode;
    if (st.dp() > 1 && one_type && st.uniform_tp() && st.num_gpus() <= sg.front()->gpus_per_node && zones.size() == 1)
      dp_link = LinkKind::kIntraNode;
    for (int r = 0; dp_link != LinkKind::kIntraNode && r + 1 < st.dp(); ++r) {
      dp_link = std::max(dp_link, ctx.network->link_between(st.replicas[static_cast<std::size_t>(r)].zone,
                                                             st.replicas[static_cast<std::size_t>(r + 1)].zone, false));
    }
    // Gradients are reduced in fp32; with replicas of different TP the ring carries the largest
    // shard (the smallest TP's), an assumption: Megatron itself cannot mix TP within a DP group.
    const double grad_bytes = 4.0 * static_cast<double>(stage_params_per_rank(model, st.first_block, st.last_block, min_tp));
    if (zones.size() > 1) {
      // A ring over the replicas crosses zone boundaries `zones.size()` times (at least twice);
      // each crossing carries 2(n-1)/n of the stage's fp32 gradients.
      const double n = st.dp();
      const double per_link = 2.0 * (n - 1) / n * grad_bytes * min_tp;
      double usd_per_byte = 0;
      for (const Replica& a : st.replicas) {
        for (const Replica& b : st.replicas) usd_per_byte = std::max(usd_per_byte, ctx.network->usd_per_byte(a.zone, b.zone));
      }
      cross_zone_usd += per_link * static_cast<double>(zones.size()) * usd_per_byte;
    }
    // Each replica is timed on its own GPU type and TP; the slowest bounds the stage.
    const GpuType* slowest_gpu = sg.front();
    int slowest_tp = st.replica_tp(0);
    double slowest_cycle = -1;
    std::vector<StageTiming> own_timing;
    own_timing.reserve(static_cast<std::size_t>(st.dp()));
    for (int r = 0; r < st.dp(); ++r) {
      Stage one{st.first_block, st.last_block, st.replica_tp(r), {st.replicas[static_cast<std::size_t>(r)]}};
      one.replicas.front().tp = 0;
      const StageTiming& own = own_timing.emplace_back(stage_timing(model, one, {sg[static_cast<std::size_t>(r)]},
                                                                    plan.micro_batch_size, plan.options, *ctx.compute,
                                                                    *ctx.network, to_next, dp_link));
      if (own.forward_s + own.backward_s > slowest_cycle) {
        slowest_cycle = own.forward_s + own.backward_s;
        slowest_gpu = sg[static_cast<std::size_t>(r)];
        slowest_tp = st.replica_tp(r);
        report.timing.p2p_s = own.p2p_s;  // refined pair by pair below
      }
      report.timing.forward_s = std::max(report.timing.forward_s, own.forward_s);
      report.timing.backward_s = std::max(report.timing.backward_s, own.backward_s);
      report.timing.update_s = std::max(report.timing.update_s, own.update_s);
    }
    if (dp_link == LinkKind::kIntraNode) {
      report.timing.dp_sync_s = ctx.network->allreduce_seconds(grad_bytes, st.dp(), LinkKind::kIntraNode, *slowest_gpu,
                                                               std::max(1, std::min(slowest_tp, slowest_gpu->gpus_per_node)));
    }
    // Refine the links pair by pair (GPU types and zones of the two ends), with Sailor's
    // multizone fits where they exist; stage_timing() only knows the link kind.
    const auto per_node = [&](int r) {
      const Replica& rep = st.replicas[static_cast<std::size_t>(r)];
      return rep.gpus_per_node > 0 ? rep.gpus_per_node : sg[static_cast<std::size_t>(r)]->gpus_per_node;
    };
    // DP ring: each TP rank's ring crosses the node's link, so its tp ranks share it.
    const auto senders = [&](int r) { return std::max(1, std::min(st.replica_tp(r), per_node(r))); };
    // p2p: every replica of this type and zone sends in the same 1F1B step (p2p_senders_per_node()).
    const auto p2p_senders = [&](int r) {
      return p2p_senders_per_node(st.replica_tp(r), replicas_like(st, st.replicas[static_cast<std::size_t>(r)]),
                                  per_node(r));
    };
    if (s + 1 < p) {
      const Stage& nx = plan.stages[static_cast<std::size_t>(s + 1)];
      const auto& ng = gpus[static_cast<std::size_t>(s + 1)];
      double worst = 0;
      for (int r = 0; r < st.dp(); ++r) {
        const double bytes = p2p_bytes_per_rank(model, plan.micro_batch_size, st.replica_tp(r));
        const double bw = p2p_bandwidth(
            st.replicas[static_cast<std::size_t>(r)].zone, *sg[static_cast<std::size_t>(r)],
            nx.replicas[static_cast<std::size_t>(r)].zone, *ng[static_cast<std::size_t>(r)], p2p_senders(r), bytes);
        const double hop = ctx.network->latency_s + bytes / bw;
        worst = std::max(worst, hop);
        per_pipeline[static_cast<std::size_t>(r)].push_back({0, 0, hop, 0, 0});
      }
      report.timing.p2p_s = worst;
    } else {
      for (auto& pipe : per_pipeline) pipe.push_back({});
    }
    for (int r = 0; r < st.dp(); ++r) {
      const StageTiming& own = own_timing[static_cast<std::size_t>(r)];
      StageTiming& t = per_pipeline[static_cast<std::size_t>(r)].back();
      t.forward_s = own.forward_s;
      t.backward_s = own.backward_s;
    }
    if (st.dp() > 1 && dp_link != LinkKind::kIntraNode) {
      const double chunk = grad_bytes / st.dp();
      double slowest_bw = 0;
      for (int r = 0; r < st.dp(); ++r) {  // the ring's slowest hop bounds it
        const int q = (r + 1) % st.dp();
        const double bw = ring_bandwidth(
            st.replicas[static_cast<std::size_t>(r)].zone, *sg[static_cast<std::size_t>(r)],
            st.replicas[static_cast<std::size_t>(q)].zone, *sg[static_cast<std::size_t>(q)], senders(r), chunk);
        slowest_bw = r == 0 ? bw : std::min(slowest_bw, bw);
      }
      report.timing.dp_sync_s = 2.0 * (st.dp() - 1) * (ctx.network->latency_s + chunk / slowest_bw);
    }
    timings.push_back(report.timing);
    ev.stages.push_back(report);
  }
  // The tied word-embedding all-reduce between stage 0 and the last stage, pipeline by pipeline
  // (replica r of both); the slowest pair bounds it.
  if (p > 1) {
    const Stage& first = plan.stages.front();
    const Stage& last = plan.stages.back();
    double tied = 0;
    for (int r = 0; r < first.dp(); ++r) {
      const Replica& a = first.replicas[static_cast<std::size_t>(r)];
      const Replica& b = last.replicas[static_cast<std::size_t>(r)];
      const GpuType& ga = *gpus.front()[static_cast<std::size_t>(r)];
      const int per_node = a.gpus_per_node > 0 ? a.gpus_per_node : ga.gpus_per_node;
      const int senders = p2p_senders_per_node(first.replica_tp(r), replicas_like(first, a), per_node);
      tied = std::max(tied, tied_embedding_sync_seconds(model, *ctx.network, p,
                                                        std::min(first.replica_tp(r), last.replica_tp(r)), a.zone, ga,
                                                        b.zone, *gpus.back()[static_cast<std::size_t>(r)], senders));
    }
    for (std::size_t s : {std::size_t{0}, static_cast<std::size_t>(p - 1)}) {
      timings[s].tied_sync_s = tied;
      ev.stages[s].timing.tied_sync_s = tied;
    }
  }
  const PipelineTime pt = pipeline_iter_seconds(timings, m);
  double slowest_pipeline = 0;
  for (const auto& pipe : per_pipeline) {
    slowest_pipeline = std::max(slowest_pipeline, pipeline_iter_seconds(pipe, m).pipeline_seconds);
  }
  ev.pipeline_seconds = slowest_pipeline;
  ev.sync_seconds = pt.sync_seconds;
  ev.iter_seconds = ev.pipeline_seconds + ev.sync_seconds;
  ev.tokens_per_second = ev.iter_seconds > 0
                             ? static_cast<double>(plan.global_batch_size) * model.seq_len / ev.iter_seconds
                             : 0.0;
  ev.usd_compute_per_iteration = usd_per_second * ev.iter_seconds;
  ev.usd_network_per_iteration = cross_zone_usd;
  ev.usd_per_iteration = ev.usd_compute_per_iteration + ev.usd_network_per_iteration;
  return ev;
}

}  // namespace flotilla::planner
