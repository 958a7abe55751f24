// The 1F1B composition and link model against hand-computed values.
#include <gtest/gtest.h>

#include "planner/evaluate.h"
#include "planner/network.h"
#include "planner/time_model.h"

namespace fp = flotilla::planner;

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
  const auto catalog = fp::builtin_gpu_catalog();
  fp::ComputeModel compute;
  fp::NetworkModel net = fp::default_network_model();
  fp::EvalContext ctx{&catalog, &compute, &net};
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 8;
  plan.stages = {{0, m.num_blocks(), 4, {{"A100-40", "z", 4}, {"A100-40", "z", 4}}}};
  const auto fast = fp::evaluate(plan, m, ctx);
  plan.stages[0].replicas[1].gpu_type = "V100-16";
  const auto mixed = fp::evaluate(plan, m, ctx);
  EXPECT_GT(mixed.iter_seconds, fast.iter_seconds);
  EXPECT_EQ(static_cast<int>(mixed.ranks.size()), 8);
  // Evaluating on one V100-16 replica alone gives the same compute as the mixed plan's straggler.
  EXPECT_NEAR(mixed.stages[0].timing.forward_s,
              compute.stage_times(m, *catalog.find("V100-16"), 0, m.num_blocks(), 4, 1).forward_s, 1e-12);
  plan.stages[0].replicas[1].gpu_type = "B999";
  EXPECT_EQ(fp::evaluate(plan, m, ctx).infeasible->kind, fp::InfeasibleKind::kUnknownGpu);
}
