// The 1F1B composition and link model against hand-computed values.
#include <gtest/gtest.h>

#include "tests/planner/stage_dp_setup.h"

#include <cmath>
#include <utility>
#include <vector>

#include "planner/evaluate.h"
#include "planner/network.h"
#include "planner/time_model.h"

namespace fp = flotilla::planner;

// One stage holding the whole model at micro-batch 1, with the given TP and DP replicas.
fp::Plan whole_model_stage(const fp::ModelSpec& m, int global_batch_size, int tp, std::vector<fp::Replica> replicas) {
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = global_batch_size;
  plan.stages = {{0, m.num_blocks(), tp, std::move(replicas)}};
  return plan;
}

// Two stages, the model's blocks split in half, at micro-batch 1.
fp::Plan two_halves(const fp::ModelSpec& m, int global_batch_size, int tp, std::vector<fp::Replica> first,
                    std::vector<fp::Replica> second) {
  const int half = m.num_blocks() / 2;
  fp::Plan plan = whole_model_stage(m, global_batch_size, tp, std::move(first));
  plan.stages[0].last_block = half;
  plan.stages.push_back({half, m.num_blocks(), tp, std::move(second)});
  return plan;
}

TEST(TimeModel, OneFOneBHandWorked) {
  std::vector<fp::StageTiming> st(2);
  st[0] = {1.0, 2.0, 0.0, 0.5, 0.1};
  st[1] = {2.0, 4.0, 0.0, 0.2, 0.1};
  // fill = 3 + 6, steady = (4-1) * 6, sync = max(0.6, 0.3)
  const auto t = fp::pipeline_iter_seconds(st, 4);
  EXPECT_DOUBLE_EQ(t.pipeline_seconds, 27.0);
  EXPECT_DOUBLE_EQ(t.sync_seconds, 0.6);
  EXPECT_DOUBLE_EQ(t.iter_seconds, 27.6);
}

// p2p on both boundaries: Megatron synchronises after every send/receive, so a middle stage's
// steady-state cycle carries the transfers to its predecessor and to its successor.
TEST(TimeModel, MiddleStageCycleCarriesBothBoundaries) {
  std::vector<fp::StageTiming> st(3);
  st[0] = {1.0, 2.0, 0.5, 0.0, 0.0};  // cycle 3 + 2*0.5 = 4
  st[1] = {1.0, 2.0, 0.25, 0.0, 0.0};  // cycle 3 + 2*0.5 + 2*0.25 = 4.5 (the straggler)
  st[2] = {1.0, 2.0, 0.0, 0.0, 0.0};  // cycle 3 + 2*0.25 = 3.5
  // fill = 4 + 3.5 + 3 = 10.5 (each boundary crossed once forward, once backward);
  // steady = (5 - 1) * 4.5 = 18.
  EXPECT_DOUBLE_EQ(fp::pipeline_iter_seconds(st, 5).pipeline_seconds, 28.5);
}

// Sailor fitted bandwidth (GB/s) over log2(message MB) on messages of 2^16..2^30 bytes.
TEST(TimeModel, BandwidthFitsAreOverLog2MegabytesWithinTheMeasuredRange) {
  fp::NetworkModel n = fp::default_network_model();
  n.intra_node["G"][2] = {{1.0, 0.0}, 0};  // bandwidth = log2(MB) GB/s, no peak cap
  // 8 MB -> 3 GB/s
  EXPECT_NEAR(n.bandwidth_bytes_per_s(fp::LinkKind::kIntraNode, "G", 2, 8e6), 3e9, 1e-3);
  // above 2^30 bytes the largest measured message's bandwidth is held: log2(1073.741824) GB/s
  EXPECT_NEAR(n.bandwidth_bytes_per_s(fp::LinkKind::kIntraNode, "G", 2, 4e9), std::log2(1073.741824) * 1e9, 1e-3);
  // The fit is <= 0 for messages up to 2^19 bytes; 2^20 bytes (1.048576 MB) is the smallest measured size
  // with a positive rate, log2(1.048576) GB/s. A 32 KiB message takes as long as that one.
  const double floor_bw = std::log2(1.048576) * 1e9;
  EXPECT_NEAR(n.bandwidth_bytes_per_s(fp::LinkKind::kIntraNode, "G", 2, 32768), floor_bw * 32768 / 1048576, 1e-3);
  EXPECT_NEAR(n.p2p_seconds(32768, fp::LinkKind::kIntraNode, "G", 2), 20e-6 + 1048576 / floor_bw, 1e-12);
  // A peak caps the fit.
  n.intra_node["G"][2].peak_bytes_per_s = 2e9;
  EXPECT_DOUBLE_EQ(n.bandwidth_bytes_per_s(fp::LinkKind::kIntraNode, "G", 2, 8e6), 2e9);
}

// Tied word embeddings: with PP > 1 the first and last stage all-reduce the fp32 embedding
// gradient (one vocab shard per TP rank) every iteration; untied models and PP 1 do not.
TEST(TimeModel, TiedEmbeddingAllReduceBetweenFirstAndLastStage) {
  auto m = *fp::find_preset("gpt-neo-2.7b");  // tied, vocab 50257, hidden 2560
  const fp::World world;  // the built-in catalog (A100-40: 4 GPUs per node), FLOP estimates, 12.5 GB/s per node
  const fp::EvalContext ctx = world.context();
  fp::Plan plan = two_halves(m, 4, 4, {{"A100-40", "z", 4}}, {{"A100-40", "z", 4}});
  // 4 B x 50257 x 2560 / 4 = 128,657,920 B per rank; two participants: 2 x half of it, at the
  // node's 12.5 GB/s shared by its 4 ranks.
  const double expected = 2.0 * (20e-6 + 64328960.0 / (12.5e9 / 4));
  const auto ev = fp::evaluate(plan, m, ctx);
  EXPECT_NEAR(ev.stages[0].timing.tied_sync_s, expected, 1e-12);
  EXPECT_NEAR(ev.stages[1].timing.tied_sync_s, expected, 1e-12);
  const double update = std::max(ev.stages[0].timing.update_s, ev.stages[1].timing.update_s);
  EXPECT_NEAR(ev.sync_seconds, expected + update, 1e-9);
  // TP 1 x DP 4 on a 4-GPU node: every pipeline's rank does it at once, 4 share the node link;
  // each holds the whole vocabulary: 4 B x 50257 x 2560 = 514,631,680 B.
  fp::Plan packed = plan;
  packed.global_batch_size = 16;
  packed.stages[0].tp = packed.stages[1].tp = 1;
  packed.stages[0].replicas.assign(4, {"A100-40", "z", 4});
  packed.stages[1].replicas.assign(4, {"A100-40", "z", 4});
  EXPECT_NEAR(fp::evaluate(packed, m, ctx).stages[0].timing.tied_sync_s,
              2.0 * (20e-6 + 257315840.0 / (12.5e9 / 4)), 1e-12);
  m.tied_embeddings = false;
  EXPECT_EQ(fp::evaluate(plan, m, ctx).stages[0].timing.tied_sync_s, 0.0);
  m.tied_embeddings = true;
  plan.stages = {{0, m.num_blocks(), 4, {{"A100-40", "z", 4}}}};
  EXPECT_EQ(fp::evaluate(plan, m, ctx).stages[0].timing.tied_sync_s, 0.0);
}

TEST(TimeModel, RingAllReduceAndLinks) {
  fp::NetworkModel n = fp::default_network_model();
  n.latency_s = 0;
  // 2(n-1)/n * bytes / bw with the default inter-node 12.5 GB/s
  EXPECT_NEAR(n.allreduce_seconds(1e9, 4, fp::LinkKind::kInterNode, "none"), 2.0 * 3 / 4 * 1e9 / 12.5e9, 1e-12);
  EXPECT_EQ(n.link_between("us-central1-a", "us-central1-b", false), fp::LinkKind::kCrossZone);
  EXPECT_EQ(n.link_between("us-central1-a", "us-west1-b", false), fp::LinkKind::kCrossRegion);
  EXPECT_DOUBLE_EQ(n.usd_per_byte("us-central1-a", "us-west1-b"), 0.02 / 1e9);
}

TEST(TimeModel, HeterogeneousReplicasSlowestBounds) {
  const auto m = *fp::find_preset("gpt-neo-2.7b");
  const fp::World world;  // the built-in catalog (A100-40: 4 GPUs per node), FLOP estimates, 12.5 GB/s per node
  const fp::EvalContext ctx = world.context();
  fp::Plan plan = whole_model_stage(m, 8, 4, {{"A100-40", "z", 4}, {"A100-40", "z", 4}});
  const auto fast = fp::evaluate(plan, m, ctx);
  plan.stages[0].replicas[1].gpu_type = "V100-16";
  const auto mixed = fp::evaluate(plan, m, ctx);
  EXPECT_GT(mixed.iter_seconds, fast.iter_seconds);
  EXPECT_EQ(static_cast<int>(mixed.ranks.size()), 8);
  // Evaluating on one V100-16 replica alone gives the same compute as the mixed plan's straggler.
  EXPECT_NEAR(mixed.stages[0].timing.forward_s,
              world.compute.stage_times(m, *world.catalog.find("V100-16"), 0, m.num_blocks(), 4, 1).forward_s, 1e-12);
  plan.stages[0].replicas[1].gpu_type = "B999";
  EXPECT_EQ(fp::evaluate(plan, m, ctx).infeasible->kind, fp::InfeasibleKind::kUnknownGpu);
}

TEST(TimeModel, MultizonePairFitsApplyBothWays) {
  fp::NetworkModel n = fp::default_network_model();
  const auto catalog = fp::builtin_gpu_catalog();
  const fp::GpuType& a100 = *catalog.find("A100-40");
  const fp::GpuType& v100 = *catalog.find("V100-16");
  // A flat 2 GB/s node-to-node fit for one sender per node (coefficients over log2(MB)).
  n.pair_fits.set("zone-a", "A100-40", 1, "zone-b", "V100-16", 1, {{0, 0, 2.0}, 10e9});
  EXPECT_DOUBLE_EQ(n.pair_bandwidth_bytes_per_s("zone-a", a100, "zone-b", v100, 1, 1e6), 2e9);
  EXPECT_DOUBLE_EQ(n.pair_bandwidth_bytes_per_s("zone-b", v100, "zone-a", a100, 1, 1e6), 2e9);
  // Two senders per node share the node's fitted total (the largest fitted group <= 2 is 1).
  EXPECT_DOUBLE_EQ(n.pair_bandwidth_bytes_per_s("zone-a", a100, "zone-b", v100, 2, 1e6), 1e9);
  // No fit for this pair: the link-kind model (different regions -> 1 GB/s default).
  EXPECT_DOUBLE_EQ(n.pair_bandwidth_bytes_per_s("us-east1-a", a100, "europe-west4-a", a100, 1, 1e6), 1e9);
}

TEST(TimeModel, SlowestPipelineNotSumOfStageMaxima) {
  // Two pipelines over two stages: pipeline 0 = (V100, A100), pipeline 1 = (A100, V100).
  // Sailor's T = max over pipelines, which is less than composing per-stage maxima (V100, V100).
  const auto m = *fp::find_preset("gpt-neo-2.7b");
  const fp::World world;  // the built-in catalog (A100-40: 4 GPUs per node), FLOP estimates, 12.5 GB/s per node
  const fp::EvalContext ctx = world.context();
  fp::Plan plan =
      two_halves(m, 16, 4, {{"V100-16", "z", 4}, {"A100-40", "z", 4}}, {{"A100-40", "z", 4}, {"V100-16", "z", 4}});
  const auto mixed = fp::evaluate(plan, m, ctx);
  plan.stages[0].replicas = {{"V100-16", "z", 4}, {"V100-16", "z", 4}};
  plan.stages[1].replicas = {{"V100-16", "z", 4}, {"V100-16", "z", 4}};
  const auto slow = fp::evaluate(plan, m, ctx);
  plan.stages[0].replicas = {{"A100-40", "z", 4}, {"A100-40", "z", 4}};
  plan.stages[1].replicas = {{"A100-40", "z", 4}, {"A100-40", "z", 4}};
  const auto fast = fp::evaluate(plan, m, ctx);
  EXPECT_LT(mixed.pipeline_seconds, slow.pipeline_seconds);
  EXPECT_GT(mixed.pipeline_seconds, fast.pipeline_seconds);
}

// Data-parallel gradient all-reduce, hand-computed with the default network (no fits: NVLink
// 100 GB/s, inter-node 12.5 GB/s per node, 20 us per step). One stage holds the whole model at
// TP 1, so each replica all-reduces 4 B (fp32 main grads) x every parameter.
TEST(TimeModel, DataParallelAllReduceIntraVsInterNode) {
  const auto m = *fp::find_preset("opt-350m");
  const fp::World world;  // the built-in catalog (A100-40: 4 GPUs per node), FLOP estimates, 12.5 GB/s per node
  const fp::EvalContext ctx = world.context();
  const double grad_bytes = 4.0 * static_cast<double>(fp::total_params(m));
  // 2 replicas of TP 1 fit one 4-GPU node: the ring runs over NVLink.
  fp::Plan plan = whole_model_stage(m, 16, 1, {{"A100-40", "z", 1}, {"A100-40", "z", 1}});
  const auto within = fp::evaluate(plan, m, ctx);
  ASSERT_TRUE(within.feasible()) << within.infeasible->message;
  EXPECT_NEAR(within.stages[0].timing.dp_sync_s, 2.0 * 1 * (20e-6 + grad_bytes / 2 / 100e9), 1e-12);
  // 8 replicas need two nodes: 2(n-1) steps of grad/n over the 12.5 GB/s NIC.
  plan.stages[0].replicas.assign(8, {"A100-40", "z", 1});
  const auto across = fp::evaluate(plan, m, ctx);
  EXPECT_NEAR(across.stages[0].timing.dp_sync_s, 2.0 * 7 * (20e-6 + grad_bytes / 8 / 12.5e9), 1e-12);
  // 2 replicas of TP 4 (8 GPUs) also span two nodes.
  plan.stages[0].tp = 4;
  plan.stages[0].replicas.assign(2, {"A100-40", "z", 4});
  const double grad4 = 4.0 * static_cast<double>(fp::stage_params_per_rank(m, 0, m.num_blocks(), 4));
  EXPECT_NEAR(fp::evaluate(plan, m, ctx).stages[0].timing.dp_sync_s,
              2.0 * (20e-6 + grad4 / 2 / (12.5e9 / 4)), 1e-12);
}

// FlashAttention applies per replica's GPU: an A100 rank drops the scores, a V100 rank of the
// same stage keeps them (no FlashAttention-2 on Volta), exactly as with materialised attention.
TEST(TimeModel, FlashAttentionOnlyOnGpusThatRunIt) {
  const auto m = *fp::find_preset("opt-350m");
  const fp::World world;  // the built-in catalog (A100-40: 4 GPUs per node), FLOP estimates, 12.5 GB/s per node
  const fp::EvalContext ctx = world.context();
  fp::Plan plan = whole_model_stage(m, 8, 1, {{"A100-40", "z", 1}, {"V100-16", "z", 1}});
  const auto materialized = fp::evaluate(plan, m, ctx);
  plan.options.flash_attention = true;
  const auto flash = fp::evaluate(plan, m, ctx);
  ASSERT_EQ(flash.ranks.size(), 2u);
  // 24 layers x (5 B x 16 x 2048^2 scores - 4 B x 16 x 2048 logsumexp), 1 in flight, plus the
  // allocator fraction on those bytes.
  const double saved = 24 * (5.0 * 16 * 2048 * 2048 - 4.0 * 16 * 2048);
  EXPECT_NEAR(static_cast<double>(materialized.ranks[0].memory.activations_bytes - flash.ranks[0].memory.activations_bytes),
              saved, 24.0);
  EXPECT_EQ(flash.ranks[1].memory.peak_bytes, materialized.ranks[1].memory.peak_bytes);
  EXPECT_LT(flash.ranks[0].memory.peak_bytes, materialized.ranks[0].memory.peak_bytes);
}
