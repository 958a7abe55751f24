// The stage DP's O(blocks) relaxation against the first version's O(blocks^2) sweep, cell for
// cell: the same complete pipelines, the same slowest cycles (bit for bit) and the same splits,
// with and without the branch-and-bound limit, where memory binds and where it does not.
#include "planner/stage_dp.h"

#include <gtest/gtest.h>

#include "planner/search.h"
#include "planner/search_proxy.h"
#include "planner/search_space.h"

namespace flotilla::planner {
namespace {

struct World {
  GpuCatalog catalog = builtin_gpu_catalog();
  ComputeModel compute{nullptr};
  NetworkModel network = default_network_model();
  EvalContext context() const {
    EvalContext c;
    c.catalog = &catalog;
    c.compute = &compute;
    c.network = &network;
    return c;
  }
};

ModelSpec deep_gpt(int layers) {
  ModelSpec m = *find_preset("opt-350m");
  m.name = "deep-" + std::to_string(layers);
  m.num_layers = layers;
  m.embed_proj_dim = 0;
  return m;
}

struct Outcome {
  std::vector<DpCandidate> candidates;
  std::int64_t states = 0;
};

Outcome solve(const SearchRequest& request, const World& world, int mbs, int dp, double limit,
              bool quadratic) {
  const EvalContext context = world.context();
  const std::vector<SearchPool> pools = merged_pools(request, *context.catalog);
  const std::vector<StageConfig> configs = stage_configs(request, pools, dp);
  ProxyTimer timer(request, context, pools, mbs);
  std::vector<std::vector<double>> prefix;
  std::vector<double> p2p;
  for (const StageConfig& config : configs) {
    prefix.push_back(timer.cycle_prefix(config));
    p2p.push_back(timer.p2p_cycle(config));
  }
  StageDpInput input;
  input.model = &request.model;
  input.training = &request.training;
  input.pools = &pools;
  input.configs = &configs;
  input.time_prefix = &prefix;
  input.p2p_cycle_seconds = &p2p;
  input.memory_constants = &context.memory_constants;
  input.micro_batch_size = mbs;
  input.dp = dp;
  input.num_micro_batches = request.global_batch_size / (mbs * dp);
  input.max_stages = request.model.num_blocks();
  input.max_stage_seconds = limit;
  input.quadratic_reference = quadratic;
  StageDp dp_solver(input);
  dp_solver.solve();
  return {dp_solver.candidates(), dp_solver.states()};
}

void expect_same(const SearchRequest& request, int mbs, int dp, double limit) {
  World world;
  const Outcome linear = solve(request, world, mbs, dp, limit, false);
  const Outcome quadratic = solve(request, world, mbs, dp, limit, true);
  SCOPED_TRACE(request.model.name + ", mbs " + std::to_string(mbs) + ", D " + std::to_string(dp) +
               ", limit " + std::to_string(limit));
  EXPECT_EQ(linear.states, quadratic.states);
  ASSERT_EQ(linear.candidates.size(), quadratic.candidates.size());
  for (std::size_t i = 0; i < linear.candidates.size(); ++i) {
    const DpCandidate& a = linear.candidates[i];
    const DpCandidate& b = quadratic.candidates[i];
    EXPECT_EQ(a.stages, b.stages);
    EXPECT_EQ(a.slowest_stage_seconds, b.slowest_stage_seconds);  // bit for bit
    EXPECT_EQ(a.usage, b.usage);
    ASSERT_EQ(a.choices.size(), b.choices.size());
    for (std::size_t s = 0; s < a.choices.size(); ++s) {
      EXPECT_EQ(a.choices[s].first_block, b.choices[s].first_block) << "candidate " << i;
      EXPECT_EQ(a.choices[s].last_block, b.choices[s].last_block) << "candidate " << i;
      EXPECT_EQ(a.choices[s].config, b.choices[s].config) << "candidate " << i;
    }
  }
}

SearchRequest request_for(ModelSpec model, std::vector<GpuPool> pools) {
  SearchRequest r;
  r.model = std::move(model);
  r.global_batch_size = 64;
  r.pools = std::move(pools);
  r.options.tp_degrees = {1, 2, 4};
  return r;
}

GpuPool pool(std::string gpu, int gpus, int node) { return GpuPool{std::move(gpu), "z", "z", gpus, node}; }

// Slowest cycle of the fastest unbounded candidate, to derive limits that prune something.
double fastest_cycle(const SearchRequest& request, int mbs, int dp) {
  World world;
  double best = 1e300;
  for (const DpCandidate& c : solve(request, world, mbs, dp, 1e300, false).candidates)
    best = std::min(best, static_cast<double>(c.slowest_stage_seconds));
  return best;
}

TEST(StageDpTest, LinearSweepEqualsQuadraticSweep) {
  SearchRequest llama =
      request_for(*find_preset("llama-2-7b"), {pool("A100-40", 8, 4), pool("V100-16", 8, 4)});
  llama.training.flash_attention = true;  // memory binds: 4096-token scores stay on the V100s
  const std::vector<SearchRequest> requests = {
      llama,
      request_for(*find_preset("gpt-neo-2.7b"), {pool("A100-40", 4, 4), pool("V100-16", 12, 4)}),
      request_for(deep_gpt(120), {pool("A100-40", 4, 4), pool("V100-16", 4, 4), pool("T4", 4, 4)}),
      request_for(deep_gpt(48), {pool("GH200-96", 4, 4), pool("T4", 8, 4)}),
  };
  for (const SearchRequest& request : requests) {
    int compared = 0;
    for (int mbs : {1, 2}) {
      for (int dp : {1, 2}) {
        const double fastest = fastest_cycle(request, mbs, dp);
        if (fastest >= 1e300) continue;  // nothing fits at this (mbs, D)
        ++compared;
        for (double limit : {1e300, fastest * 1.5, fastest * 1.05, fastest})
          expect_same(request, mbs, dp, limit);
      }
    }
    EXPECT_GT(compared, 0) << request.model.name << " has no pipeline at all";
  }
}

// The whole search returns the same plans with either sweep.
TEST(StageDpTest, SearchWithLinearSweepReturnsTheQuadraticSweepsPlans) {
  World world;
  for (const SearchRequest& base :
       {request_for(*find_preset("gpt-neo-2.7b"), {pool("A100-40", 16, 4), pool("V100-16", 32, 4)}),
        request_for(deep_gpt(96), {pool("A100-40", 8, 8), pool("V100-16", 16, 4), pool("GH200-96", 8, 4)})}) {
    SearchRequest request = base;
    request.global_batch_size = 512;
    request.options.max_plans = 4;
    const SearchResult linear = search_plans(request, world.context());
    request.options.quadratic_stage_dp = true;
    const SearchResult quadratic = search_plans(request, world.context());
    ASSERT_FALSE(linear.plans.empty()) << linear.failure;
    ASSERT_EQ(linear.plans.size(), quadratic.plans.size());
    EXPECT_EQ(linear.stats.dp_states, quadratic.stats.dp_states);
    for (std::size_t i = 0; i < linear.plans.size(); ++i) {
      EXPECT_EQ(describe_plan(linear.plans[i].plan), describe_plan(quadratic.plans[i].plan));
      EXPECT_EQ(linear.plans[i].evaluation.tokens_per_second,
                quadratic.plans[i].evaluation.tokens_per_second);
    }
  }
}

}  // namespace
}  // namespace flotilla::planner
