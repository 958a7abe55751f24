// DP replicas of different GPU types and TP degrees within one stage, against hand-computed
// values (issue 13, item 1): each replica is timed on its own GPU type and TP, the slowest
// bounds the stage; each replica's memory is checked against its own GPU; the DP all-reduce
// takes the ring's slowest link.
#include <gtest/gtest.h>

#include "planner/evaluate.h"
#include "planner/runtime_overhead.h"
#include "planner/memory_model.h"
#include "planner/sailor_plan.h"
#include "planner/search_space.h"

namespace fp = flotilla::planner;

namespace {

// A 4-layer model (6 blocks) with flat, hand-chosen per-block times: fwd, bwd = 2 fwd,
// update = fwd / 10, exactly proportional to the micro-batch size.
struct Fixture {
  fp::ModelSpec model;
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  fp::ProfileSet profiles;
  fp::NetworkModel network = fp::default_network_model();
  fp::ComputeModel compute{&profiles};  // the fixture is never moved, so the pointer holds

  fp::EvalContext context() const { return {&catalog, &compute, &network}; }
  // A measured link between two (zone, GPU type) node kinds with gpus_per_node GPUs each
  // sending at once, flat at gb_per_s for the node (a fit over log2 MB with only a constant).
  void flat_link(std::pair<const char*, const char*> a, std::pair<const char*, const char*> b, int gpus_per_node,
                 double gb_per_s) {
    network.pair_fits.set(a.first, a.second, gpus_per_node, b.first, b.second, gpus_per_node,
                          {{0, 0, gb_per_s}, 100e9});
  }

  Fixture() {
    model = *fp::find_preset("opt-350m");
    model.name = "hand-model";
    model.aliases.clear();
    model.num_layers = 4;
    // fwd seconds per block at micro-batch 1: A100-40 TP1 1 ms, TP2 0.5 ms; V100-16 TP1 3 ms, TP2 2 ms.
    add("A100-40", {{1, 1e-3}, {2, 0.5e-3}});
    add("V100-16", {{1, 3e-3}, {2, 2e-3}});
    network.latency_s = 0;
  }
  void add(const std::string& gpu, const std::vector<std::pair<int, double>>& fwd_by_tp) {
    fp::GpuProfile p;
    p.model = model.name;
    p.gpu = gpu;
    for (int mbs : {1, 2}) {
      for (const auto& [tp, f] : fwd_by_tp) {
        p.by_mbs_tp[mbs][tp] = std::vector<fp::LayerTimes>(
            static_cast<std::size_t>(model.num_blocks()), fp::LayerTimes{f * mbs, 2 * f * mbs, f / 10});
      }
    }
    profiles.add(p);
  }
  fp::Plan one_stage(std::vector<fp::Replica> replicas, int tp, int gbs) const {
    fp::Plan plan;
    plan.micro_batch_size = 1;
    plan.global_batch_size = gbs;
    plan.stages = {{0, model.num_blocks(), tp, std::move(replicas)}};
    return plan;
  }
};

}  // namespace

TEST(MixedReplicas, SlowestReplicaOnItsOwnTypeAndTpBoundsTheStage) {
  Fixture f;
  const fp::EvalContext ctx = f.context();
  // Replica 0: A100-40 TP1 (6 blocks x 1 ms = 6 ms fwd); replica 1: V100-16 TP2 (6 x 2 ms = 12 ms).
  // Were the V100 replica timed at the stage's TP 1 it would take 18 ms.
  fp::Replica v100_tp2{"V100-16", "z", 2, 2};
  const fp::Plan plan = f.one_stage({{"A100-40", "z", 1}, v100_tp2}, 1, 8);
  ASSERT_EQ(plan.num_gpus(), 3);
  const fp::Evaluation ev = fp::evaluate(plan, f.model, ctx);
  ASSERT_TRUE(ev.feasible()) << ev.infeasible->message;
  EXPECT_EQ(static_cast<int>(ev.ranks.size()), 3);  // 1 + 2 TP ranks
  EXPECT_EQ(ev.ranks[2].replica, 1);
  EXPECT_EQ(ev.ranks[2].tp_rank, 1);
  EXPECT_NEAR(ev.stages[0].timing.forward_s, 12e-3, 1e-12);
  EXPECT_NEAR(ev.stages[0].timing.backward_s, 24e-3, 1e-12);
  // m = 8 / (1 x 2) = 4 micro-batches, one stage: the slowest pipeline takes 4 x (12 + 24) ms.
  EXPECT_EQ(ev.num_micro_batches, 4);
  EXPECT_NEAR(ev.pipeline_seconds, 4 * 36e-3, 1e-12);
  // Update: the slowest replica's, V100 TP2: 6 x 0.2 ms.
  EXPECT_NEAR(ev.stages[0].timing.update_s, 1.2e-3, 1e-12);

  // The same stage with both replicas on A100-40 TP1: 4 x (6 + 12) ms.
  const fp::Evaluation fast = fp::evaluate(f.one_stage({{"A100-40", "z", 1}, {"A100-40", "z", 1}}, 1, 8), f.model, ctx);
  EXPECT_NEAR(fast.pipeline_seconds, 4 * 18e-3, 1e-12);
}

TEST(MixedReplicas, EachPipelineKeepsItsOwnReplicaTimes) {
  // Two stages, two pipelines: (A100 TP1, V100 TP2) and (V100 TP2, A100 TP1); 3 blocks a stage.
  // Each pipeline: fill = (3 + 6) + (6 + 12) ms = 27 ms, steady = (m - 1) x 18 ms; m = 4.
  // Composing per-stage maxima would give 36 + 3 x 18 = 90 ms; Sailor's max over pipelines 81 ms.
  Fixture f;
  f.network.default_inter_node_bytes_per_s = 1e30;  // p2p ~ 0 so the compute is what is checked
  f.network.inter_node.clear();
  f.network.pair_fits.clear();
  const fp::EvalContext ctx = f.context();
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 8;
  fp::Replica v{"V100-16", "z", 2, 2};
  plan.stages = {{0, 3, 1, {{"A100-40", "z", 1}, v}}, {3, 6, 1, {v, {"A100-40", "z", 1}}}};
  const fp::Evaluation ev = fp::evaluate(plan, f.model, ctx);
  ASSERT_TRUE(ev.feasible()) << ev.infeasible->message;
  EXPECT_NEAR(ev.pipeline_seconds, 27e-3 + 3 * 18e-3, 1e-6);
}

TEST(MixedReplicas, ReplicaThatDoesNotFitItsOwnGpuMakesThePlanInfeasible) {
  Fixture f;
  // A GPU like the V100-16 but with a capacity between the stage's TP2 and TP1 peaks.
  const fp::GpuType& v100 = *f.catalog.find("V100-16");
  fp::StageShape shape{0, f.model.num_blocks(), 1, 2, 1, 1, {}};
  const auto runtime = [&](int tp) {
    return fp::runtime_overhead(v100, fp::stage_communicators(0, f.model.num_blocks(), f.model.num_blocks(), tp, 2, v100.gpus_per_node))
        .total_bytes();
  };
  const std::int64_t tp1 = fp::rank_peak_bytes(fp::stage_memory(f.model, shape), runtime(1));
  shape.tp = 2;
  const std::int64_t tp2 = fp::rank_peak_bytes(fp::stage_memory(f.model, shape), runtime(2));
  ASSERT_LT(tp2, tp1);
  fp::GpuType small = v100;
  small.name = "Small-GPU";
  small.aliases.clear();
  small.memory_bytes = (tp1 + tp2) / 2;
  f.catalog.upsert(small);
  const fp::EvalContext ctx = f.context();

  // TP1 on the small GPU (ranks: A100 replica = rank 0, small replica = rank 1): out of memory
  // on rank 1 alone, against the small GPU's own capacity; the A100-40 replica fits.
  const fp::Evaluation oom = fp::evaluate(f.one_stage({{"A100-40", "z", 1}, {"Small-GPU", "z", 1}}, 1, 8), f.model, ctx);
  ASSERT_FALSE(oom.feasible());
  EXPECT_EQ(oom.infeasible->kind, fp::InfeasibleKind::kOutOfMemory);
  EXPECT_EQ(oom.infeasible->rank, 1);
  EXPECT_EQ(oom.infeasible->stage, 0);
  EXPECT_EQ(oom.infeasible->capacity_bytes, small.memory_bytes);
  EXPECT_EQ(oom.infeasible->peak_bytes, tp1);
  EXPECT_EQ(oom.ranks[0].capacity_bytes, f.catalog.find("A100-40")->memory_bytes);

  // The same small GPU at its own TP 2 holds its half of the stage: feasible, and its ranks
  // report the TP2 peak while the A100 rank reports the TP1 one.
  fp::Replica small_tp2{"Small-GPU", "z", 2, 2};
  const fp::Evaluation ok = fp::evaluate(f.one_stage({{"A100-40", "z", 1}, small_tp2}, 1, 8), f.model, ctx);
  ASSERT_TRUE(ok.feasible()) << ok.infeasible->message;
  EXPECT_EQ(ok.ranks[1].memory.peak_bytes, tp2);
  EXPECT_EQ(ok.ranks[2].memory.peak_bytes, tp2);
}

TEST(MixedReplicas, AllReduceTakesTheSlowestLinkOfTheRing) {
  Fixture f;
  // Three TP1 replicas: A100 in zone a, A100 in zone a (another node), V100 in zone b. Measured
  // node-to-node fits (flat, GB/s): A100<->A100 10, A100<->V100 1. Ring hops: a->a 10, a->b 1,
  // b->a 1: the all-reduce runs at 1 GB/s.
  f.flat_link({"za", "A100-40"}, {"za", "A100-40"}, 1, 10.0);
  f.flat_link({"za", "A100-40"}, {"zb", "V100-16"}, 1, 1.0);
  const fp::EvalContext ctx = f.context();
  const fp::Plan plan = f.one_stage({{"A100-40", "za", 1}, {"A100-40", "za", 1}, {"V100-16", "zb", 1}}, 1, 6);
  const fp::Evaluation ev = fp::evaluate(plan, f.model, ctx);
  ASSERT_TRUE(ev.feasible()) << ev.infeasible->message;
  // Ring all-reduce of the fp32 gradients G: 2 (n - 1) hops of G / n bytes at the slowest link.
  const double grads = 4.0 * static_cast<double>(fp::stage_params_per_rank(f.model, 0, f.model.num_blocks(), 1));
  EXPECT_NEAR(ev.stages[0].timing.dp_sync_s, 2.0 * 2 * (grads / 3) / 1e9, 1e-9);
  // With the A100<->V100 link measured at 10 GB/s as well, the ring runs at 10 GB/s.
  f.flat_link({"za", "A100-40"}, {"zb", "V100-16"}, 1, 10.0);
  const fp::Evaluation fast = fp::evaluate(plan, f.model, ctx);
  EXPECT_NEAR(fast.stages[0].timing.dp_sync_s, 2.0 * 2 * (grads / 3) / 10e9, 1e-9);
}

TEST(MixedReplicas, PipelineSendOverAFittedLinkIsSplitOverTheTpRanks) {
  Fixture f;
  // Stage 0 on an A100-40 node, stage 1 on a V100-16 node, TP 2 each, one zone. The node-to-node
  // fit for 2 GPUs per node is flat at 0.5 GB/s (node total), like the slow RTX links.
  f.flat_link({"za", "A100-40"}, {"za", "V100-16"}, 2, 0.5);
  const fp::EvalContext ctx = f.context();
  fp::Plan plan;
  plan.micro_batch_size = 2;
  plan.global_batch_size = 8;  // 4 micro-batches
  plan.stages = {{0, 3, 2, {{"A100-40", "za", 2}}}, {3, f.model.num_blocks(), 2, {{"V100-16", "za", 2}}}};
  const fp::Evaluation ev = fp::evaluate(plan, f.model, ctx);
  ASSERT_TRUE(ev.feasible()) << ev.infeasible->message;
  // Activations 2 * seq * mbs * hidden bytes, scattered over the 2 TP ranks; both ranks send
  // at once and share the node's 0.5 GB/s: (A / 2) / (0.5 GB/s / 2) = A / 0.5 GB/s.
  const double activations = 2.0 * f.model.seq_len * 2 * f.model.hidden;
  const double p2p = activations / 0.5e9;
  EXPECT_NEAR(ev.stages[0].timing.p2p_s, p2p, 1e-12);
  // 1F1B by hand, micro-batch 2: A100 TP2 blocks 0-2: fwd 3 x 1 ms, bwd 6 ms; V100 TP2
  // blocks 3-5: fwd 3 x 4 ms, bwd 24 ms. Both stages' cycles carry the boundary twice; the fill
  // crosses it once forward and once backward.
  const double c0 = 3e-3 + 6e-3 + 2 * p2p;
  const double c1 = 12e-3 + 24e-3 + 2 * p2p;
  EXPECT_NEAR(ev.pipeline_seconds, c0 + 36e-3 + 3 * std::max(c0, c1), 1e-12);
}

TEST(MixedReplicas, EveryReplicaOnANodeSharesItsLinkForPipelineSends) {
  Fixture f;
  // Four TP-1 replicas per stage, one type per stage, one zone: Megatron puts them on one
  // 4-GPU node each (ranks ordered TP, DP), and all four pipelines send in the same 1F1B step.
  // The node-to-node fit for 4 GPUs sending at once is flat at 0.5 GB/s (node total).
  f.flat_link({"za", "A100-40"}, {"za", "V100-16"}, 4, 0.5);
  const fp::EvalContext ctx = f.context();
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 8;
  const std::vector<fp::Replica> a100(4, {"A100-40", "za", 4});
  const std::vector<fp::Replica> v100(4, {"V100-16", "za", 4});
  plan.stages = {{0, 3, 1, a100}, {3, f.model.num_blocks(), 1, v100}};
  const fp::Evaluation ev = fp::evaluate(plan, f.model, ctx);
  ASSERT_TRUE(ev.feasible()) << ev.infeasible->message;
  // Each rank sends the whole activation tensor (TP 1) at a quarter of the node's 0.5 GB/s.
  const double activations = 2.0 * f.model.seq_len * 1 * f.model.hidden;
  EXPECT_NEAR(ev.stages[0].timing.p2p_s, activations / (0.5e9 / 4), 1e-12);
  EXPECT_EQ(fp::p2p_senders_per_node(1, 4, 4), 4);
  EXPECT_EQ(fp::p2p_senders_per_node(2, 8, 8), 8);  // capped by the node
  EXPECT_EQ(fp::p2p_senders_per_node(8, 1, 8), 8);
  EXPECT_EQ(fp::p2p_senders_per_node(2, 1, 8), 2);
}

TEST(MixedReplicas, SailorPlanWithReplicasOfDifferentTpParses) {
  const char* json = R"({"mbs": 1, "gbs": 8, "pipeline_list": [{"num_stages": 1, "layers_per_stage": [[0,1,2,3,4,5]],
    "tmp_per_stage": [[ [[["A100-40", 1, "z"]], 1], [[["V100-16", 2, "z"]], 2] ]], "dp": [2]}]})";
  const auto parsed = fp::parse_sailor_plan(json, 6);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  const fp::Stage& st = parsed.value().plan.stages[0];
  EXPECT_EQ(st.tp, 1);
  EXPECT_EQ(st.replica_tp(0), 1);
  EXPECT_EQ(st.replica_tp(1), 2);
  EXPECT_FALSE(st.uniform_tp());
  EXPECT_EQ(parsed.value().plan.num_gpus(), 3);
  EXPECT_EQ(fp::gpus_per_type(parsed.value().plan).at("V100-16"), 2);
  EXPECT_EQ(fp::describe_plan(parsed.value().plan), "mbs 1, D 2, 1 stage: A100-40 TP1 x1 + V100-16 TP2 x1 x6b");
}
