// The search's fast estimate must equal evaluate() on single-zone plans: the stage DP and the
// candidate ranking rely on it, so drift in the time model would silently mis-rank plans.
#include "planner/search_proxy.h"
#include "planner/stage_dp.h"
#include "tests/planner/stage_dp_setup.h"

#include <gtest/gtest.h>

#include <set>

namespace flotilla::planner {
namespace {

// FLOP-based compute, default network, built-in catalog.
struct FlopContext {
  GpuCatalog catalog = builtin_gpu_catalog();
  ComputeModel compute{nullptr};
  NetworkModel network = default_network_model();
  EvalContext context{&catalog, &compute, &network};
};

// A hand-picked split as stage choices: each (first block, config) pair runs to the next stage's
// first block, the last to `blocks`; config indices wrap around the `configs` available.
std::vector<StageChoice> split_choices(const std::vector<std::pair<int, int>>& split, int blocks, std::size_t configs) {
  std::vector<StageChoice> choices;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const int last = i + 1 < split.size() ? split[i + 1].first : blocks;
    choices.push_back({split[i].first, last, split[i].second % static_cast<int>(configs)});
  }
  return choices;
}

TEST(SearchProxyTest, EstimateEqualsEvaluateOnSingleZonePlans) {
  const FlopContext flops;
  const EvalContext& context = flops.context;
  const GpuCatalog& catalog = flops.catalog;
  for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    SearchRequest request;
    request.model = *find_preset("gpt-neo-2.7b");
    request.global_batch_size = 256;
    request.training.recompute = recompute;
    request.pools = {{"A100-40", "z", "z", 64, 4}, {"V100-16", "z", "z", 64, 4}};
    const std::vector<SearchPool> pools = merged_pools(request, catalog);
    for (int mbs : {1, 2}) {
      for (int dp : {1, 2, 8}) {
        const std::vector<StageConfig> configs = stage_configs(request, pools, dp);
        ProxyTimer timer(request, context, pools, mbs);
        const int blocks = request.model.num_blocks();
        // Hand-picked splits: one stage, uneven two, three mixing GPU types and TP.
        const std::vector<std::vector<std::pair<int, int>>> splits = {
            {{0, 0}}, {{0, 1}, {12, 3}}, {{0, 5}, {7, 0}, {20, 2}}};
        for (const auto& split : splits) {
          const std::vector<StageChoice> choices = split_choices(split, blocks, configs.size());
          Plan plan;
          ASSERT_EQ(materialize_plan(request, pools, configs, choices, mbs, dp, plan), "");
          const Evaluation e = evaluate(plan, request.model, context);
          const ProxyTimer::Estimate estimate =
              timer.estimate(choices, configs, dp, request.global_batch_size / (mbs * dp));
          EXPECT_NEAR(estimate.iter_seconds, e.iter_seconds, 1e-9 * e.iter_seconds)
              << describe_plan(plan);
          EXPECT_NEAR(estimate.usd_per_iteration, e.usd_per_iteration, 1e-9 * e.usd_per_iteration)
              << describe_plan(plan);
        }
      }
    }
  }
}

// The stage DP's memory table and evaluate() apply FlashAttention the same way (only on GPUs
// that run it): every pipeline the DP returns for Llama-3-8B (s = 8192) on A100-40 + V100-16
// fits under evaluate(), with flash; with materialised scores the DP finds none at all.
TEST(SearchProxyTest, StageDpMemoryMatchesEvaluateWithFlash) {
  const FlopContext flops;
  const EvalContext& context = flops.context;
  std::size_t found[2] = {0, 0};
  for (bool flash : {false, true}) {
    SearchRequest request;
    request.model = *find_preset("llama-3-8b");
    request.global_batch_size = 64;
    request.training.flash_attention = flash;
    request.pools = {{"A100-40", "z", "z", 16, 4}, {"V100-16", "z", "z", 16, 4}};
    const int dp = 2, mbs = 1;
    DpSetup setup(request, context, mbs, dp, 8);
    const std::vector<SearchPool>& pools = setup.pools;
    const std::vector<StageConfig>& configs = setup.configs;
    StageDp solver(setup.input);
    solver.solve();
    for (const DpCandidate& candidate : solver.candidates()) {
      Plan plan;
      ASSERT_EQ(materialize_plan(request, pools, configs, candidate.choices, mbs, dp, plan), "");
      const Evaluation e = evaluate(plan, request.model, context);
      EXPECT_TRUE(e.feasible()) << describe_plan(plan) << ": " << e.infeasible->message;
      ++found[flash];
    }
  }
  EXPECT_EQ(found[0], 0u);
  EXPECT_GT(found[1], 0u);
}

// One timer serves a whole micro-batch size: several D in turn, candidates in any order, on
// pools grouped across regions (zone links differ per stage boundary). Its memos (all-reduce
// seconds per (link, span) for the current D, links per zone pair) must give each estimate a
// fresh timer gives (a memo that kept the previous D's all-reduce seconds fails here).
TEST(SearchProxyTest, TimerSharedAcrossDegreesAndSplitsEqualsAFreshTimer) {
  const FlopContext flops;
  SearchRequest request;
  request.model = *find_preset("gpt-neo-2.7b");
  request.global_batch_size = 256;
  request.pools = {{"A100-40", "east-a", "east", 32, 4}, {"A100-40", "east-b", "east", 16, 4},
                   {"A100-40", "west-a", "west", 32, 4}, {"V100-16", "east-a", "east", 32, 4},
                   {"V100-16", "west-a", "west", 16, 4}};
  const std::vector<SearchPool> pools =
      group_pools_across_regions(request, merged_pools(request, flops.catalog));
  ASSERT_FALSE(pools.front().regions.empty()) << "the A100-40 pools should group across regions";
  const int blocks = request.model.num_blocks();
  const std::vector<std::vector<std::pair<int, int>>> splits = {
      {{0, 0}}, {{0, 1}, {12, 3}}, {{0, 5}, {7, 0}, {20, 2}}, {{0, 2}, {9, 4}, {18, 1}, {25, 0}}};
  ProxyTimer shared(request, flops.context, pools, 1);
  int compared = 0;
  std::set<double> distinct;
  for (int round = 0; round < 2; ++round) {  // D in turn, twice: the memo resets and refills
    for (int dp : {8, 2, 4}) {
      const std::vector<StageConfig> configs = stage_configs(request, pools, dp);
      for (const auto& split : splits) {
        const std::vector<StageChoice> choices = split_choices(split, blocks, configs.size());
        if (!regions_hold(pools, configs, choices, dp)) continue;
        const int m = request.global_batch_size / dp;
        ProxyTimer fresh(request, flops.context, pools, 1);
        const double expected = fresh.estimate(choices, configs, dp, m).iter_seconds;
        EXPECT_EQ(shared.estimate(choices, configs, dp, m).iter_seconds, expected) << "D " << dp;
        distinct.insert(expected);
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 12);
  EXPECT_GE(distinct.size(), 6u);
}

}  // namespace
}  // namespace flotilla::planner
