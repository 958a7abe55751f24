// The stage DP's memo (stage_dp_memo.h): it recalls a run only when every input the DP reads is
// equal (regions and zone names are not read, so they may differ), its recalled outcome is
// the one solve() returns, and the mixed-type passes that share it return the same plans as
// passes that solve every run.
#include "planner/stage_dp_memo.h"

#include <gtest/gtest.h>

#include "planner/search.h"
#include "tests/planner/stage_dp_setup.h"

namespace flotilla::planner {
namespace {

SearchRequest two_type_request() {
  SearchRequest r;
  r.model = *find_preset("gpt-neo-2.7b");
  r.global_batch_size = 64;
  r.options.tp_degrees = {1, 2, 4};
  r.pools = {GpuPool{"A100-40", "z", "z", 16, 4}, GpuPool{"V100-16", "z", "z", 32, 4}};
  return r;
}

void expect_same_candidates(const std::vector<DpCandidate>& a, const std::vector<DpCandidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].stages, b[i].stages);
    EXPECT_EQ(a[i].slowest_stage_seconds, b[i].slowest_stage_seconds);
    EXPECT_EQ(a[i].usage, b[i].usage);
    ASSERT_EQ(a[i].choices.size(), b[i].choices.size());
    for (std::size_t s = 0; s < a[i].choices.size(); ++s) {
      EXPECT_EQ(a[i].choices[s].first_block, b[i].choices[s].first_block);
      EXPECT_EQ(a[i].choices[s].last_block, b[i].choices[s].last_block);
      EXPECT_EQ(a[i].choices[s].config, b[i].choices[s].config);
    }
  }
}

// True when the memo recalled the run (and then checks the outcome against a fresh solve).
bool recalled(StageDpMemo& memo, const StageDpInput& input) {
  StageDp solver(input);
  const bool hit = memo.solve(input, solver);
  StageDp reference(input);
  reference.solve();
  EXPECT_EQ(solver.states(), reference.states());
  EXPECT_EQ(solver.truncated(), reference.truncated());
  expect_same_candidates(solver.candidates(), reference.candidates());
  return hit;
}

TEST(StageDpMemoTest, RecallsOnlyRunsWhoseInputsAreIdentical) {
  World world;
  const SearchRequest request = two_type_request();
  DpSetup setup(request, world.context(), 1, 4, request.model.num_blocks());
  StageDpMemo memo;
  EXPECT_FALSE(recalled(memo, setup.input));  // first time: solved
  EXPECT_TRUE(recalled(memo, setup.input));   // the same run again

  // Other names for the regions and zones: the DP never reads them.
  std::vector<SearchPool> renamed = setup.pools;
  for (SearchPool& p : renamed) {
    p.region = "elsewhere";
    for (auto& zone : p.zones) zone.first = "elsewhere-a";
  }
  StageDpInput input = setup.input;
  input.pools = &renamed;
  EXPECT_TRUE(recalled(memo, input));

  // An equal copy of a GPU type (the mixed passes' merged types are one copy per pass).
  std::vector<GpuType> copies;
  copies.reserve(renamed.size());
  for (SearchPool& p : renamed) p.gpu = &copies.emplace_back(*p.gpu);
  EXPECT_TRUE(recalled(memo, input));

  // Anything the DP reads differs: solved, not recalled.
  std::vector<SearchPool> fewer = setup.pools;
  fewer[1].gpus -= 8;  // V100-16: less capacity
  input = setup.input;
  input.pools = &fewer;
  EXPECT_FALSE(recalled(memo, input));

  std::vector<SearchPool> smaller = setup.pools;
  GpuType less_memory = *smaller[0].gpu;
  less_memory.memory_bytes -= 8'000'000'000LL;
  smaller[0].gpu = &less_memory;
  input = setup.input;
  input.pools = &smaller;
  EXPECT_FALSE(recalled(memo, input));

  std::vector<SearchPool> split = setup.pools;
  split[1].region_gpus = {16, 16};  // the same GPUs in two regions: fewer whole TP groups
  split[1].regions = {"r1", "r2"};
  input = setup.input;
  input.pools = &split;
  EXPECT_FALSE(recalled(memo, input));

  std::vector<std::vector<double>> slower_prefix = *setup.input.time_prefix;
  for (double& t : slower_prefix.back()) t *= 1.5;
  input = setup.input;
  input.time_prefix = &slower_prefix;
  EXPECT_FALSE(recalled(memo, input));

  std::vector<double> p2p = *setup.input.p2p_cycle_seconds;
  p2p.front() += 1e-3;
  input = setup.input;
  input.p2p_cycle_seconds = &p2p;
  EXPECT_FALSE(recalled(memo, input));

  input = setup.input;
  input.max_stage_seconds = 1.0;
  EXPECT_FALSE(recalled(memo, input));
  input = setup.input;
  input.max_states_per_depth = 50;
  EXPECT_FALSE(recalled(memo, input));
  input = setup.input;
  input.max_stages = setup.input.max_stages - 1;
  EXPECT_FALSE(recalled(memo, input));

  DpSetup other_mbs(request, world.context(), 2, 4, request.model.num_blocks());
  EXPECT_FALSE(recalled(memo, other_mbs.input));
  DpSetup other_dp(request, world.context(), 1, 2, request.model.num_blocks());
  EXPECT_FALSE(recalled(memo, other_dp.input));
}

// Two regions with the same pools: their mixed-type passes solve the same runs, and sharing
// them changes no plan, tokens/s or state count.
TEST(StageDpMemoTest, MixedPassesInTwinRegionsShareRunsAndReturnTheSamePlans) {
  World world;
  SearchRequest request = two_type_request();
  request.global_batch_size = 256;
  request.options.max_plans = 5;
  request.pools = {GpuPool{"A100-40", "east-a", "east", 8, 4}, GpuPool{"V100-16", "east-a", "east", 24, 4},
                   GpuPool{"A100-40", "west-a", "west", 8, 4}, GpuPool{"V100-16", "west-a", "west", 24, 4}};
  const SearchResult shared = search_plans(request, world.context());
  request.options.reuse_identical_dp_runs = false;
  const SearchResult solved = search_plans(request, world.context());
  ASSERT_FALSE(solved.plans.empty()) << solved.failure;
  EXPECT_GT(shared.stats.dp_solves_recalled, 0);
  EXPECT_EQ(solved.stats.dp_solves_recalled, 0);
  EXPECT_EQ(shared.stats.dp_states, solved.stats.dp_states);
  EXPECT_EQ(shared.stats.dp_runs, solved.stats.dp_runs);
  ASSERT_EQ(shared.plans.size(), solved.plans.size());
  for (std::size_t i = 0; i < solved.plans.size(); ++i) {
    EXPECT_EQ(describe_plan(shared.plans[i].plan), describe_plan(solved.plans[i].plan));
    EXPECT_EQ(shared.plans[i].evaluation.tokens_per_second, solved.plans[i].evaluation.tokens_per_second);
  }
  EXPECT_EQ(shared.rejection_counts, solved.rejection_counts);
}

}  // namespace
}  // namespace flotilla::planner
