// The stage DP's O(blocks) relaxations (the one-pointer sweep for source rows that never
// increase, the sliding-window sweep for any row) against the first version's O(blocks^2)
// sweep, cell for cell: the same complete pipelines, the same slowest cycles (bit for bit) and
// the same splits, with and without the branch-and-bound limit, where memory binds and where it
// does not; and the lazy beam against the eager one.
#include "planner/stage_dp.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "planner/search.h"
#include "planner/search_space.h"
#include "tests/planner/stage_dp_setup.h"

namespace flotilla::planner {
namespace {

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

enum class Sweep { kDefault, kWindow, kQuadratic };

Outcome solve(const SearchRequest& request, const World& world, int mbs, int dp, double limit,
              Sweep sweep) {
  const EvalContext context = world.context();
  DpSetup setup(request, context, mbs, dp, request.model.num_blocks());
  setup.input.max_stage_seconds = limit;
  setup.input.quadratic_reference = sweep == Sweep::kQuadratic;
  setup.input.window_sweep_reference = sweep == Sweep::kWindow;
  StageDp dp_solver(setup.input);
  dp_solver.solve();
  return {dp_solver.candidates(), dp_solver.states()};
}

void expect_same_outcome(const Outcome& linear, const Outcome& quadratic);

void expect_same(const SearchRequest& request, int mbs, int dp, double limit) {
  World world;
  const Outcome quadratic = solve(request, world, mbs, dp, limit, Sweep::kQuadratic);
  // The default (one pointer where a source row never increases, else the window) and the
  // window sweep everywhere, each against the quadratic sweep.
  for (Sweep sweep : {Sweep::kDefault, Sweep::kWindow}) {
    const Outcome linear = solve(request, world, mbs, dp, limit, sweep);
    SCOPED_TRACE(request.model.name + ", mbs " + std::to_string(mbs) + ", D " + std::to_string(dp) + ", limit " +
                 std::to_string(limit) + (sweep == Sweep::kWindow ? ", window sweep" : ", default sweep"));
    expect_same_outcome(linear, quadratic);
  }
}

void expect_same_outcome(const Outcome& linear, const Outcome& quadratic) {
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
  for (const DpCandidate& c : solve(request, world, mbs, dp, 1e300, Sweep::kDefault).candidates)
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

// The beam relaxes a depth's states lazily, in order of a lower bound on their score, and stops
// once none left can enter (keep_best_states()). It must keep exactly the states, rows and
// splits that relaxing every state first and then choosing keeps, ties included (many states
// share their slowest stage, so scores tie and the state id decides), and it must skip some.
TEST(StageDpTest, LazyBeamEqualsEagerBeam) {
  const std::vector<SearchRequest> requests = {
      request_for(deep_gpt(120), {pool("A100-40", 8, 4), pool("V100-16", 8, 4), pool("T4", 8, 4)}),
      request_for(deep_gpt(48), {pool("GH200-96", 8, 4), pool("T4", 16, 4), pool("A100-40", 8, 4)}),
      request_for(*find_preset("gpt-neo-2.7b"), {pool("A100-40", 8, 4), pool("V100-16", 16, 4)}),
  };
  std::int64_t lazy_rows = 0, eager_rows = 0;
  int selections = 0;
  World world;
  const EvalContext context = world.context();
  for (const SearchRequest& request : requests) {
    const double fastest = fastest_cycle(request, 1, 1);
    ASSERT_LT(fastest, 1e300) << request.model.name;
    for (std::int64_t width : {3, 20, 100}) {
      for (double limit : {1e300, fastest * 1.5, fastest * 1.05}) {
        SCOPED_TRACE(request.model.name + ", beam " + std::to_string(width) + ", limit " + std::to_string(limit));
        DpSetup setup(request, context, 1, 1, request.model.num_blocks());
        setup.input.max_stage_seconds = limit;
        setup.input.max_states_per_depth = width;
        StageDp lazy(setup.input);
        lazy.solve();
        setup.input.eager_beam_reference = true;
        StageDp eager(setup.input);
        eager.solve();
        lazy_rows += lazy.relaxed_states();
        eager_rows += eager.relaxed_states();
        if (eager.relaxed_states() > lazy.relaxed_states()) ++selections;
        const Outcome a{lazy.candidates(), lazy.states()}, b{eager.candidates(), eager.states()};
        ASSERT_FALSE(a.candidates.empty());
        expect_same_outcome(a, b);
      }
    }
  }
  std::printf("lazy beam: %lld state rows relaxed against %lld eager, in %d of 27 runs fewer\n",
              static_cast<long long>(lazy_rows), static_cast<long long>(eager_rows), selections);
  EXPECT_GT(selections, 10);
  EXPECT_LT(lazy_rows * 10, eager_rows * 9);  // it skips at least a tenth
}

// The search does not re-check regions_hold() on the DP's candidates (search.cpp): the DP's usage
// dimensions per TP level must make every candidate on a pool grouped across regions place, each
// stage in one region. Hand-computed: A100-40 with 192 / 96 / 96 GPUs in three regions at D 32
// holds 6 / 3 / 3 TP units; two TP-4 stages (8 of 12 units in all) do not place, since only r1
// holds a group of 4. The exact DP and a beam must offer no such pipeline, and every candidate
// must pass regions_hold().
TEST(StageDpTest, CandidatesOnPoolsGroupedAcrossRegionsHoldTheirRegions) {
  World world;
  const EvalContext context = world.context();
  SearchRequest request = request_for(deep_gpt(24), {});
  request.global_batch_size = 512;
  const char* regions[] = {"r1", "r2", "r3"};
  const int gpus[] = {192, 96, 96};
  for (int r = 0; r < 3; ++r)
    request.pools.push_back({"A100-40", std::string(regions[r]) + "-a", regions[r], gpus[r], 8});
  const int dp = 32;
  const std::vector<SearchPool> pools = group_pools_across_regions(request, merged_pools(request, world.catalog));
  ASSERT_EQ(pools.size(), 1u);
  const std::vector<StageConfig> configs = stage_configs(request, pools, dp);
  ProxyTimer timer(request, context, pools, 1);
  const StageDpTimes times = stage_dp_times(timer, configs, dp);
  int candidates = 0, with_tp4 = 0;
  for (std::int64_t width : {std::int64_t{0}, std::int64_t{50}}) {
    StageDpInput input = stage_dp_input(request, context, pools, configs, times, 1, dp, request.model.num_blocks());
    input.max_states_per_depth = width;
    StageDp solver(input);
    solver.solve();
    for (const DpCandidate& candidate : solver.candidates()) {
      ++candidates;
      int tp4_stages = 0;
      for (const StageChoice& choice : candidate.choices) tp4_stages += configs[choice.config].tp == 4;
      with_tp4 += tp4_stages == 1;
      EXPECT_LE(tp4_stages, 1) << "width " << width << ", " << candidate.stages << " stages";
      EXPECT_TRUE(regions_hold(pools, configs, candidate.choices, dp)) << "width " << width;
    }
  }
  EXPECT_GT(candidates, 10);
  EXPECT_GT(with_tp4, 0);  // TP 4 is offered, just never twice
}

// cannot_complete() may only say "no" where solve() finds no pipeline at all; it must also say it
// somewhere: below the fastest cycle (the bound rules everything out), and where the GPUs are too
// few or too small for the model at that D.
TEST(StageDpTest, RelaxationRulesOutOnlyRunsThatFindNothing) {
  SearchRequest llama =
      request_for(*find_preset("llama-2-7b"), {pool("A100-40", 8, 4), pool("V100-16", 8, 4)});
  llama.training.flash_attention = true;
  const std::vector<SearchRequest> requests = {
      llama,
      request_for(*find_preset("gpt-neo-2.7b"), {pool("A100-40", 4, 4), pool("V100-16", 12, 4)}),
      request_for(deep_gpt(120), {pool("A100-40", 4, 4), pool("V100-16", 4, 4), pool("T4", 4, 4)}),
      request_for(deep_gpt(48), {pool("GH200-96", 4, 4), pool("T4", 8, 4)}),
      request_for(*find_preset("llama-2-13b"), {pool("V100-16", 8, 4), pool("T4", 8, 4)}),
  };
  World world;
  const EvalContext context = world.context();
  int ruled_out = 0, with_plans = 0;
  for (const SearchRequest& request : requests) {
    for (int mbs : {1, 2, 4}) {
      for (int dp : {1, 2, 4}) {
        const double fastest = fastest_cycle(request, mbs, dp);
        for (double limit : {1e300, fastest * 1.05, fastest * 0.95}) {
          DpSetup setup(request, context, mbs, dp, request.model.num_blocks());
          if (setup.configs.empty()) continue;
          setup.input.max_stage_seconds = limit;
          StageDp relaxed(setup.input);
          const bool no = relaxed.cannot_complete();
          StageDp exact(setup.input);
          exact.solve();
          const bool found = !exact.candidates().empty();
          EXPECT_FALSE(no && found) << request.model.name << ", mbs " << mbs << ", D " << dp << ", limit "
                                    << limit;
          ruled_out += no ? 1 : 0;
          with_plans += found ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(ruled_out, 10);
  EXPECT_GT(with_plans, 10);
}

// The whole search with and without the relaxation's pre-check: the same plans, fewer DP runs.
TEST(StageDpTest, SearchWithRelaxationReturnsTheSamePlans) {
  World world;
  for (const SearchRequest& base :
       {request_for(*find_preset("gpt-neo-2.7b"), {pool("A100-40", 16, 4), pool("V100-16", 32, 4)}),
        request_for(*find_preset("llama-2-13b"), {pool("A100-80", 16, 8), pool("V100-16", 32, 4), pool("T4", 16, 4)}),
        request_for(deep_gpt(96), {pool("A100-40", 8, 8), pool("V100-16", 16, 4), pool("GH200-96", 8, 4)})}) {
    SearchRequest request = base;
    request.global_batch_size = 512;
    request.options.max_plans = 4;
    request.options.micro_batch_sizes = {1, 2, 4, 8};
    const SearchResult pruned = search_plans(request, world.context());
    request.options.prune_by_relaxation = false;
    const SearchResult full = search_plans(request, world.context());
    ASSERT_FALSE(full.plans.empty()) << full.failure;
    ASSERT_EQ(pruned.plans.size(), full.plans.size());
    for (std::size_t i = 0; i < full.plans.size(); ++i) {
      EXPECT_EQ(describe_plan(pruned.plans[i].plan), describe_plan(full.plans[i].plan));
      EXPECT_EQ(pruned.plans[i].evaluation.tokens_per_second, full.plans[i].evaluation.tokens_per_second);
    }
    EXPECT_EQ(pruned.stats.dp_runs + pruned.stats.dp_runs_ruled_out, full.stats.dp_runs);
    EXPECT_EQ(pruned.rejection_counts, full.rejection_counts);
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

SearchRequest deep_request(int layers, std::vector<GpuPool> pools) {
  SearchRequest r;
  r.model = deep_gpt(layers);
  r.global_batch_size = 2048;
  r.training.flash_attention = true;
  r.pools = std::move(pools);
  r.options.max_plans = 3;
  return r;
}

// Every returned plan covers all blocks in order and is feasible when evaluated again.
void expect_whole_and_feasible(const SearchRequest& request, const SearchResult& result,
                               const EvalContext& context) {
  ASSERT_FALSE(result.plans.empty()) << result.failure;
  for (const RankedPlan& ranked : result.plans) {
    int next = 0;
    for (const Stage& stage : ranked.plan.stages) {
      EXPECT_EQ(stage.first_block, next);
      next = stage.last_block;
    }
    EXPECT_EQ(next, request.model.num_blocks());
    const Evaluation again = evaluate(ranked.plan, request.model, context);
    EXPECT_TRUE(again.feasible());
    EXPECT_FALSE(violation(request, ranked.plan, again).has_value());
  }
}

// Up to 126 layers (128 blocks) every block boundary is searched: presets are never grouped.
TEST(StageDpTest, PresetsAreSearchedExactly) {
  World world;
  SearchRequest request = deep_request(96, {pool("A100-40", 16, 8), pool("V100-16", 16, 4)});
  request.model = *find_preset("gpt-3-175b");
  request.training.recompute = Recompute::kFull;
  const SearchResult result = search_plans(request, world.context());
  EXPECT_EQ(result.stats.layers_per_dp_position, 1);
}

// Grouping layers (past 128 positions) against the exact DP on the same request, where the
// exact one still runs in seconds. Grouping restricts the DP's stage boundaries to every
// `group` layers; refine() then re-splits the chosen sequence of (GPU, TP) over single layers,
// so only the choice of sequence can differ. Measured: ratio 1.0000 on both; 0.9914 on a
// 400-layer, 3 x 16 GPU case (16 s exact, too slow here); bench_plan_search has more. 2 % is
// the tolerance docs/planner.md states.
TEST(StageDpTest, GroupedLayersStayWithinTwoPercentOfExact) {
  World world;
  for (const SearchRequest& grouped :
       {deep_request(300, {pool("A100-40", 20, 8), pool("V100-16", 24, 4)}),
        deep_request(260, {pool("A100-40", 8, 8), pool("V100-16", 8, 4), pool("GH200-96", 8, 4)})}) {
    const SearchResult fast = search_plans(grouped, world.context());
    SearchRequest exact_request = grouped;
    exact_request.options.max_stage_dp_positions = 0;
    const SearchResult exact = search_plans(exact_request, world.context());
    expect_whole_and_feasible(grouped, fast, world.context());
    expect_whole_and_feasible(exact_request, exact, world.context());
    EXPECT_GT(fast.stats.layers_per_dp_position, 1);
    EXPECT_EQ(exact.stats.layers_per_dp_position, 1);
    const double ratio = fast.plans.front().evaluation.tokens_per_second /
                         exact.plans.front().evaluation.tokens_per_second;
    std::printf("  %s: grouped %s, exact %s, throughput ratio %.4f\n", grouped.model.name.c_str(),
                describe_plan(fast.plans.front().plan).c_str(),
                describe_plan(exact.plans.front().plan).c_str(), ratio);
    EXPECT_GE(ratio, 0.98);
  }
}

// Grouping must not turn a model that fits into "fits nowhere". Llama-2-7B widths at 128 layers
// on examples/cluster.yaml's GPUs fit only in pipelines whose V100 stages hold one layer at
// their in-flight count (the exact DP finds an 11-stage plan); two layers per position (128
// layers > 126) hid all of them. The search must regroup finer and return feasible, whole plans
// that also agree with an exact search's best to 1e-9.
TEST(StageDpTest, GroupingThatHidesEveryFittingSplitIsSearchedAgainFiner) {
  World world;
  SearchRequest request = deep_request(128, {pool("A100-40", 20, 8), pool("V100-16", 24, 4)});
  request.model = *find_preset("llama-2-7b");
  request.model.num_layers = 128;
  const SearchResult result = search_plans(request, world.context());
  expect_whole_and_feasible(request, result, world.context());
  EXPECT_EQ(result.stats.layers_per_dp_position, 1);  // 256 positions cover 130 blocks
  SearchRequest exact_request = request;
  exact_request.options.max_stage_dp_positions = 0;
  const SearchResult exact = search_plans(exact_request, world.context());
  ASSERT_FALSE(exact.plans.empty()) << exact.failure;
  EXPECT_NEAR(result.plans.front().evaluation.iter_seconds,
              exact.plans.front().evaluation.iter_seconds,
              1e-9 * exact.plans.front().evaluation.iter_seconds);
  // A model that fits nowhere even exactly (1024 such layers) is regrouped up to
  // kMaxRegroupPositions, still grouped there, and the failure says so.
  request.model.num_layers = 1024;
  const SearchResult none = search_plans(request, world.context());
  EXPECT_TRUE(none.plans.empty());
  EXPECT_EQ(none.stats.layers_per_dp_position, 3);  // ceil(1024 / 510)
  EXPECT_NE(none.failure.find("3 layers per stage-DP position"), std::string::npos) << none.failure;
}

// What the operator's reconcile loop needs: a 1000-layer model on mixed GPUs plans through the
// library (no CLI cap in the way) well within a minute; ~0.2 s on the 2-core dev machine.
TEST(StageDpTest, ThousandLayerModelPlansWithinAGenerousBound) {
  World world;
  const SearchRequest request =
      deep_request(1000, {pool("A100-40", 20, 8), pool("V100-16", 24, 4), pool("GH200-96", 8, 4)});
  const auto start = std::chrono::steady_clock::now();
  const SearchResult result = search_plans(request, world.context());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  1000 layers: %.3f s, %s\n", seconds,
              result.plans.empty() ? result.failure.c_str() : describe_plan(result.plans.front().plan).c_str());
  EXPECT_LT(seconds, 30.0);
  expect_whole_and_feasible(request, result, world.context());
  EXPECT_EQ(result.stats.layers_per_dp_position, 8);  // ceil(1000 / 126)
}

}  // namespace
}  // namespace flotilla::planner
