// The search's fast estimate must equal evaluate() on single-zone plans: the stage DP and the
// candidate ranking rely on it, so drift in the time model would silently mis-rank plans.
#include "planner/search_proxy.h"

#include <gtest/gtest.h>

namespace flotilla::planner {
namespace {

TEST(SearchProxyTest, EstimateEqualsEvaluateOnSingleZonePlans) {
  const GpuCatalog catalog = builtin_gpu_catalog();
  const ComputeModel compute(nullptr);
  const NetworkModel network = default_network_model();
  EvalContext context;
  context.catalog = &catalog;
  context.compute = &compute;
  context.network = &network;
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
          std::vector<StageChoice> choices;
          for (std::size_t i = 0; i < split.size(); ++i) {
            const int first = split[i].first;
            const int last = i + 1 < split.size() ? split[i + 1].first : blocks;
            choices.push_back({first, last, split[i].second % static_cast<int>(configs.size())});
          }
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

}  // namespace
}  // namespace flotilla::planner
