// Plan search against the exhaustive oracle on instances small enough to enumerate, plus the
// guarantees every returned plan must keep (no OOM, constraints respected, deterministic).
#include "planner/search.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "planner/exhaustive.h"
#include "planner/region_assigner.h"
#include "planner/search_space.h"
#include "tests/planner/stage_dp_setup.h"

namespace flotilla::planner {
namespace {

// A 4-layer GPT-Neo slice (tied embeddings, learned positions).
ModelSpec small_neo() {
  ModelSpec model = *find_preset("gpt-neo-2.7b");
  model.name = "gpt-neo-4l";
  model.num_layers = 4;
  return model;
}

SearchRequest request_for(ModelSpec model, int gbs, std::vector<GpuPool> pools) {
  SearchRequest r;
  r.model = std::move(model);
  r.global_batch_size = gbs;
  r.pools = std::move(pools);
  r.options.micro_batch_sizes = {1, 2, 4};
  r.options.tp_degrees = {1, 2, 4};
  r.options.max_plans = 3;
  return r;
}

GpuPool pool(std::string gpu, int gpus, int node, std::string zone = "z") {
  return GpuPool{std::move(gpu), zone, zone, gpus, node};
}

// Every returned plan: feasible when re-evaluated, every rank within its GPU's memory, within
// the pools and the request's constraints.
void expect_guarantees(const SearchRequest& request, const SearchResult& result,
                       const EvalContext& context) {
  for (const RankedPlan& ranked : result.plans) {
    const Evaluation again = evaluate(ranked.plan, request.model, context);
    ASSERT_TRUE(again.feasible()) << again.infeasible->message;
    for (const RankReport& rank : again.ranks)
      EXPECT_LE(rank.memory.peak_bytes, rank.capacity_bytes) << "rank " << rank.rank;
    EXPECT_FALSE(violation(request, ranked.plan, again).has_value());
    std::map<std::pair<std::string, std::string>, int> used;
    for (const Stage& stage : ranked.plan.stages)
      for (const Replica& replica : stage.replicas) used[{replica.gpu_type, replica.zone}] += stage.tp;
    for (const auto& [key, gpus] : used) {
      int free = 0;
      for (const GpuPool& p : request.pools)
        if (context.catalog->find(p.gpu_type)->name == key.first && p.zone == key.second) free += p.gpus;
      EXPECT_LE(gpus, free) << key.first << " in " << key.second;
    }
  }
}

void expect_near_oracle(const SearchRequest& request, const World& world) {
  const EvalContext context = world.context();
  const SearchResult searched = search_plans(request, context);
  const SearchResult oracle = exhaustive_search(request, context);
  ASSERT_TRUE(oracle.failure.empty() || oracle.plans.empty()) << oracle.failure;
  ASSERT_FALSE(oracle.plans.empty()) << "instance has no feasible plan: " << oracle.failure;
  ASSERT_FALSE(searched.plans.empty()) << searched.failure;
  expect_guarantees(request, searched, context);
  const Evaluation& best = searched.plans.front().evaluation;
  const Evaluation& optimum = oracle.plans.front().evaluation;
  std::printf("  search: %s  %.0f tok/s  %.4f USD/iter  (%lld evaluations)\n",
              describe_plan(searched.plans.front().plan).c_str(), best.tokens_per_second,
              best.usd_per_iteration, static_cast<long long>(searched.stats.evaluations));
  std::printf("  oracle: %s  %.0f tok/s  %.4f USD/iter  (%lld plans)\n",
              describe_plan(oracle.plans.front().plan).c_str(), optimum.tokens_per_second,
              optimum.usd_per_iteration, static_cast<long long>(oracle.stats.evaluations));
  if (request.objective == Objective::kMaxThroughput) {
    EXPECT_GE(best.tokens_per_second, 0.99 * optimum.tokens_per_second);
  } else {
    EXPECT_LE(best.usd_per_iteration, optimum.usd_per_iteration / 0.99);
  }
}

TEST(SearchTest, HomogeneousA100MatchesExhaustive) {
  World world;
  expect_near_oracle(request_for(small_llama(), 32, {pool("A100-40", 8, 4)}), world);
}

TEST(SearchTest, HeterogeneousA100V100MatchesExhaustive) {
  World world;
  expect_near_oracle(
      request_for(small_llama(), 32, {pool("A100-40", 4, 4), pool("V100-16", 8, 4)}), world);
}

TEST(SearchTest, HeterogeneousFewFastManySlowMatchesExhaustive) {
  World world;
  expect_near_oracle(
      request_for(small_neo(), 64, {pool("A100-40", 2, 2), pool("V100-16", 6, 4)}), world);
}

TEST(SearchTest, TwoZonesMatchExhaustive) {
  World world;
  expect_near_oracle(request_for(small_neo(), 8,
                                 {pool("A100-40", 4, 4, "zone-a"), pool("A100-40", 4, 4, "zone-b"),
                                  pool("V100-16", 4, 4, "zone-b")}),
                     world);
}

bool mixes_types_in_a_stage(const Plan& plan) {
  for (const Stage& stage : plan.stages)
    for (const Replica& replica : stage.replicas)
      if (replica.gpu_type != stage.replicas.front().gpu_type) return true;
  return false;
}

TEST(SearchTest, MixedTypeStagesMatchExhaustiveAndBeatOneTypePerStage) {
  // Issue 13: 6 A100-40 and 2 A100-80 (same speed) in one zone. One type per stage caps a
  // stage's D at what one type holds; mixing lets one stage take D = 8 replicas over both
  // types, with no pipeline bubble. The oracle enumerates the same mixed space.
  World world;
  SearchRequest request = request_for(small_neo(), 512, {pool("A100-40", 6, 8), pool("A100-80", 2, 8)});
  expect_near_oracle(request, world);
  const SearchResult mixed = search_plans(request, world.context());
  request.options.mix_types_within_stage = false;
  const SearchResult pure = search_plans(request, world.context());
  ASSERT_FALSE(mixed.plans.empty());
  ASSERT_FALSE(pure.plans.empty());
  std::printf("  one type per stage: %s %.0f tok/s\n", describe_plan(pure.plans.front().plan).c_str(),
              pure.plans.front().evaluation.tokens_per_second);
  EXPECT_TRUE(mixes_types_in_a_stage(mixed.plans.front().plan)) << describe_plan(mixed.plans.front().plan);
  EXPECT_GT(mixed.plans.front().evaluation.tokens_per_second, pure.plans.front().evaluation.tokens_per_second);
  for (const RankedPlan& r : pure.plans) EXPECT_FALSE(mixes_types_in_a_stage(r.plan));
}

TEST(SearchTest, GpuCountRangeMatchesExhaustive) {
  // The fastest plan on 4 A100 + 8 V100 uses more than 6 GPUs; capped at 6 (and at least 3),
  // the search must still find the oracle's best plan within the range.
  World world;
  SearchRequest request =
      request_for(small_llama(), 32, {pool("A100-40", 4, 4), pool("V100-16", 8, 4)});
  const SearchResult free = search_plans(request, world.context());
  ASSERT_FALSE(free.plans.empty());
  EXPECT_GT(free.plans.front().plan.num_gpus(), 6) << "instance does not test the cap";
  request.constraints.min_gpus = 3;
  request.constraints.max_gpus = 6;
  expect_near_oracle(request, world);
  for (const RankedPlan& ranked : search_plans(request, world.context()).plans) {
    EXPECT_GE(ranked.plan.num_gpus(), 3);
    EXPECT_LE(ranked.plan.num_gpus(), 6);
  }
}

TEST(SearchTest, UniformTpEqualsTheBestSingleTpSearch) {
  // One TP for all stages = the best of the searches restricted to one TP degree each.
  World world;
  SearchRequest request =
      request_for(small_llama(), 32, {pool("A100-40", 4, 4), pool("V100-16", 8, 4)});
  request.options.uniform_tp = true;
  const SearchResult uniform = search_plans(request, world.context());
  ASSERT_FALSE(uniform.plans.empty()) << uniform.failure;
  double best_single = 0;
  for (int tp : request.options.tp_degrees) {
    SearchRequest one = request;
    one.options.uniform_tp = false;
    one.options.tp_degrees = {tp};
    const SearchResult single = search_plans(one, world.context());
    if (!single.plans.empty())
      best_single = std::max(best_single, single.plans.front().evaluation.tokens_per_second);
  }
  EXPECT_DOUBLE_EQ(uniform.plans.front().evaluation.tokens_per_second, best_single);
  for (const RankedPlan& ranked : uniform.plans)
    for (const Stage& stage : ranked.plan.stages) EXPECT_EQ(stage.tp, ranked.plan.stages.front().tp);
  expect_guarantees(request, uniform, world.context());
}

TEST(SearchTest, MinCostWithThroughputFloorMatchesExhaustive) {
  World world;
  SearchRequest request = request_for(small_llama(), 32, {pool("A100-40", 8, 4)});
  request.objective = Objective::kMinCost;
  // 80% of what the fastest plan reaches: the cheapest plan (1 stage, 86.8k tok/s) is excluded.
  const SearchResult fastest = exhaustive_search(request_for(request.model, 32, request.pools),
                                                 world.context());
  ASSERT_FALSE(fastest.plans.empty());
  request.constraints.min_tokens_per_second = 0.8 * fastest.plans.front().evaluation.tokens_per_second;
  expect_near_oracle(request, world);
}

TEST(SearchTest, MaxThroughputUnderBudgetMatchesExhaustive) {
  World world;
  SearchRequest request = request_for(small_llama(), 32, {pool("A100-40", 8, 4)});
  const SearchResult fastest = exhaustive_search(request, world.context());
  SearchRequest cheapest_request = request;
  cheapest_request.objective = Objective::kMinCost;
  const SearchResult cheapest = exhaustive_search(cheapest_request, world.context());
  ASSERT_FALSE(fastest.plans.empty());
  ASSERT_FALSE(cheapest.plans.empty());
  const double fastest_usd = fastest.plans.front().evaluation.usd_per_iteration;
  const double cheapest_usd = cheapest.plans.front().evaluation.usd_per_iteration;
  ASSERT_LT(cheapest_usd, fastest_usd) << "instance does not trade cost for speed";
  // Between the cheapest plan's cost and the fastest plan's: the fastest is ruled out.
  request.constraints.max_usd_per_iteration = 0.5 * (cheapest_usd + fastest_usd);
  expect_near_oracle(request, world);
}

TEST(SearchTest, RespectsGpuTypeQuota) {
  World world;
  SearchRequest request =
      request_for(small_llama(), 8, {pool("A100-40", 8, 4), pool("V100-16", 8, 4)});
  request.constraints.max_gpus_per_type["A100-40"] = 2;
  const SearchResult result = search_plans(request, world.context());
  ASSERT_FALSE(result.plans.empty()) << result.failure;
  expect_guarantees(request, result, world.context());
  for (const RankedPlan& ranked : result.plans) {
    const auto used = gpus_per_type(ranked.plan);
    EXPECT_LE(used.count("A100-40") ? used.at("A100-40") : 0, 2);
  }
}

TEST(SearchTest, ImpossibleBudgetFailsWithOneLineReason) {
  World world;
  SearchRequest request = request_for(small_llama(), 8, {pool("A100-40", 8, 4)});
  request.constraints.max_usd_per_iteration = 1e-9;
  const SearchResult result = search_plans(request, world.context());
  EXPECT_TRUE(result.plans.empty());
  EXPECT_NE(result.failure.find("budget"), std::string::npos) << result.failure;
  EXPECT_EQ(result.failure.find('\n'), std::string::npos);
  EXPECT_GT(result.rejection_counts.at("over-budget"), 0);
}

// An unreachable throughput floor used to read "fits nowhere ...; e.g. " with nothing after it:
// the bound pruned every pipeline without a line. It names the floor now.
TEST(SearchTest, UnreachableThroughputFloorIsNamed) {
  World world;
  for (Objective objective : {Objective::kMinCost, Objective::kMaxThroughput}) {
    SearchRequest request = request_for(small_llama(), 8, {pool("A100-40", 8, 4)});
    request.objective = objective;
    request.constraints.min_tokens_per_second = 1e12;
    const SearchResult result = search_plans(request, world.context());
    EXPECT_TRUE(result.plans.empty());
    EXPECT_NE(result.failure.find("below the minimum throughput"), std::string::npos) << result.failure;
    EXPECT_NE(result.failure.find("tokens/s"), std::string::npos) << result.failure;
    EXPECT_EQ(result.failure.find("e.g. ;"), std::string::npos) << result.failure;
  }
}

TEST(SearchTest, ModelThatFitsNowhereSaysSo) {
  World world;
  SearchRequest request = request_for(*find_preset("llama-2-70b"), 8, {pool("T4", 4, 4)});
  const SearchResult result = search_plans(request, world.context());
  EXPECT_TRUE(result.plans.empty());
  EXPECT_NE(result.failure.find("fits nowhere"), std::string::npos) << result.failure;
}

// The bound prunes only what cannot win: same best plan with and without it, on an instance
// too big for the oracle (GPT-Neo-2.7B, 32 A100 + 96 V100, Sailor's global batch).
TEST(SearchTest, BranchAndBoundKeepsTheSameBestPlan) {
  World world;
  SearchRequest request = request_for(*find_preset("gpt-neo-2.7b"), 2048,
                                      {pool("A100-40", 32, 4), pool("V100-16", 96, 4)});
  request.options.micro_batch_sizes = {1, 2, 4, 8};
  request.options.tp_degrees = {1, 2, 4};
  const SearchResult bounded = search_plans(request, world.context());
  request.options.branch_and_bound = false;
  const SearchResult unbounded = search_plans(request, world.context());
  ASSERT_FALSE(bounded.plans.empty()) << bounded.failure;
  ASSERT_FALSE(unbounded.plans.empty()) << unbounded.failure;
  EXPECT_DOUBLE_EQ(bounded.plans.front().evaluation.tokens_per_second,
                   unbounded.plans.front().evaluation.tokens_per_second);
  EXPECT_LE(bounded.stats.dp_states, unbounded.stats.dp_states);
  expect_guarantees(request, bounded, world.context());
}

TEST(SearchTest, IsDeterministic) {
  World world;
  const SearchRequest request =
      request_for(small_neo(), 16, {pool("A100-40", 4, 4), pool("V100-16", 8, 4)});
  const SearchResult a = search_plans(request, world.context());
  const SearchResult b = search_plans(request, world.context());
  ASSERT_EQ(a.plans.size(), b.plans.size());
  for (std::size_t i = 0; i < a.plans.size(); ++i)
    EXPECT_EQ(describe_plan(a.plans[i].plan), describe_plan(b.plans[i].plan));
}

// small_llama() on A100-40 with 192 / 96 / 96 free GPUs in regions r1 / r2 / r3 (zones r1-a, ...).
SearchRequest a100_in_three_regions() {
  SearchRequest request = request_for(small_llama(), 512, {});
  const char* regions[] = {"r1", "r2", "r3"};
  const int gpus[] = {192, 96, 96};
  for (int r = 0; r < 3; ++r) request.pools.push_back({"A100-40", std::string(regions[r]) + "-a", regions[r], gpus[r], 8});
  return request;
}

// Issue 13 item 4: a GPU type spread over several regions is one pool of the stage DP; each
// stage must still sit in one region. Hand-computed: A100-40 with 192 / 96 / 96 free GPUs in
// three regions, D = 32 -> 6 / 3 / 3 TP units. Whole groups of 4 units: 4 + 0 + 0.
TEST(SearchTest, GroupedRegionsHoldWholeTpGroupsPerRegion) {
  World world;
  SearchRequest request = a100_in_three_regions();
  const std::vector<SearchPool> grouped = group_pools_across_regions(request, merged_pools(request, world.catalog));
  ASSERT_EQ(grouped.size(), 1u);
  EXPECT_EQ(grouped[0].gpus, 384);
  EXPECT_EQ(largest_region_gpus(grouped[0]), 192);
  EXPECT_EQ(stage_units(grouped[0], 32, 1), 12);
  EXPECT_EQ(stage_units(grouped[0], 32, 2), 10);  // 6 + 2 + 2
  EXPECT_EQ(stage_units(grouped[0], 32, 4), 4);   // 4 + 0 + 0
  EXPECT_EQ(stage_units(grouped[0], 32, 8), 0);
  const std::vector<StageConfig> configs = {{0, 4}, {0, 2}};
  // Two TP-4 stages: 8 units <= 12 in all, but only r1 holds a group of 4.
  EXPECT_FALSE(regions_hold(grouped, configs, {{0, 3, 0}, {3, 6, 0}}, 32));
  // TP 4 then TP 2: r1 holds both (6 units), placed largest first.
  EXPECT_TRUE(regions_hold(grouped, configs, {{0, 3, 1}, {3, 6, 0}}, 32));
  Plan plan;
  ASSERT_EQ(materialize_plan(request, grouped, configs, {{0, 3, 1}, {3, 6, 0}}, 1, 32, plan), "");
  for (const Stage& stage : plan.stages)
    for (const Replica& replica : stage.replicas) EXPECT_EQ(replica.zone, "r1-a");
  EXPECT_NE(materialize_plan(request, grouped, configs, {{0, 3, 0}, {3, 6, 0}}, 1, 32, plan), "");
  // Three TP-2 stages and a TP-4: 4 + 2 in r1, the other two TP-2 stages in r2 and r3.
  const std::vector<StageChoice> four = {{0, 1, 1}, {1, 2, 1}, {2, 3, 0}, {3, 6, 1}};
  EXPECT_TRUE(regions_hold(grouped, configs, four, 32));
  ASSERT_EQ(materialize_plan(request, grouped, configs, four, 1, 32, plan), "");
  std::map<std::string, int> per_zone = gpus_per_zone(plan);
  EXPECT_EQ(per_zone["r1-a"], 192);
  EXPECT_EQ(per_zone["r2-a"], 64);
  EXPECT_EQ(per_zone["r3-a"], 64);
  for (const Stage& stage : plan.stages)
    for (const Replica& replica : stage.replicas) EXPECT_EQ(replica.zone, stage.replicas.front().zone);
}

// The proxy keeps one RegionAssigner for a whole (mbs, D) run's candidates (search_proxy.cpp):
// reused split after split, including after a split that does not place, it must give each the
// regions worked out by hand, and take a neighbour's region by name across pools. A100-40 with
// 192 / 96 / 96 GPUs in r1 / r2 / r3 at D 32 holds 6 / 3 / 3 TP units; V100-16 sits in r2 only.
TEST(SearchTest, RegionAssignerReusedAcrossSplitsGivesHandComputedRegions) {
  World world;
  SearchRequest request = a100_in_three_regions();
  request.pools.push_back({"V100-16", "r2-v", "r2", 64, 8});
  const std::vector<SearchPool> pools = group_pools_across_regions(request, merged_pools(request, world.catalog));
  ASSERT_EQ(pools.size(), 2u);
  const int a100 = pools[0].gpu_type == "A100-40" ? 0 : 1, v100 = 1 - a100;
  ASSERT_EQ(pools[a100].regions, (std::vector<std::string>{"r1", "r2", "r3"}));
  const std::vector<StageConfig> configs = {{a100, 4}, {a100, 2}, {a100, 1}, {v100, 2}};
  // V100 TP 2 (its own region, r2), then A100 TP 1: beside its neighbour in r2, not in r1.
  const std::vector<StageChoice> beside = {{0, 3, 3}, {3, 6, 2}};
  // Three TP-2 stages then a TP 4: in pipeline order the first three fill r1 and the TP 4 finds
  // no region; largest TP first: TP 4 and stage 0 in r1, stage 1 in r2, stage 2 in r3.
  const std::vector<StageChoice> retried = {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {3, 6, 0}};
  const std::vector<StageChoice> no_room = {{0, 3, 0}, {3, 6, 0}};  // two TP 4: only r1 holds one
  RegionAssigner assigner(pools, configs, 32);
  EXPECT_TRUE(assigner.serves(configs, 32));
  EXPECT_FALSE(assigner.serves(configs, 16));
  EXPECT_FALSE(assigner.serves({{a100, 4}, {a100, 2}, {a100, 1}, {v100, 4}}, 32));
  std::vector<int> region;
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(assigner.assign(beside, Placement::kPipelineOrder, region));
    EXPECT_EQ(region, (std::vector<int>{0, 1}));
    ASSERT_TRUE(assigner.assign(retried, Placement::kPipelineOrder, region));
    EXPECT_EQ(region, (std::vector<int>{0, 1, 2, 0}));
    // The free function (one throwaway assigner) gives the same hand-computed regions.
    EXPECT_EQ(assign_regions(pools, configs, retried, 32), (std::vector<int>{0, 1, 2, 0}));
    EXPECT_FALSE(assigner.assign(no_room, Placement::kPipelineOrder, region));
    EXPECT_TRUE(region.empty());
    std::vector<std::size_t> first;
    assigner.first_zones(retried, first);
    ASSERT_EQ(first.size(), 4u);
    const char* zones[] = {"r1-a", "r2-a", "r3-a", "r1-a"};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(pools[a100].zones[first[i]].first, zones[i]) << "stage " << i;
    assigner.first_zones(beside, first);
    EXPECT_EQ(pools[v100].zones[first[0]].first, "r2-v");
    EXPECT_EQ(pools[a100].zones[first[1]].first, "r2-a");
  }
}

// A tied model's last stage can sit beside stage 0 (one embedding all-reduce per iteration in
// one zone) instead of in pipeline order; the search and the oracle try both placements.
TEST(SearchTest, LastStageBesideFirstForTiedEmbeddings) {
  World world;
  const SearchRequest request = request_for(small_neo(), 8,
                                            {pool("A100-40", 4, 4, "zone-a"), pool("A100-40", 4, 4, "zone-b"),
                                             pool("V100-16", 4, 4, "zone-b")});
  // As the search sees them: zone-a and zone-b (two regions) grouped into one A100-40 pool.
  const std::vector<SearchPool> pools = group_pools_across_regions(request, merged_pools(request, world.catalog));
  ASSERT_EQ(pools.size(), 2u);
  int a100 = -1, v100 = -1;
  for (int k = 0; k < static_cast<int>(pools.size()); ++k) (pools[k].gpu_type == "A100-40" ? a100 : v100) = k;
  ASSERT_GE(a100, 0);
  ASSERT_GE(v100, 0);
  const std::vector<StageConfig> configs = {{v100, 4}, {a100, 4}};
  const std::vector<StageChoice> choices = {{0, 2, 0}, {2, 4, 1}, {4, 6, 1}};
  ASSERT_TRUE(tied_placement_differs(request, pools, configs, choices));
  Plan in_order, beside;
  ASSERT_EQ(materialize_plan(request, pools, configs, choices, 1, 1, in_order), "");
  ASSERT_EQ(materialize_plan(request, pools, configs, choices, 1, 1, beside, Placement::kLastBesideFirst), "");
  EXPECT_EQ(beside.stages[0].replicas[0].zone, "zone-b");
  EXPECT_EQ(beside.stages[2].replicas[0].zone, "zone-b");  // beside stage 0
  EXPECT_EQ(beside.stages[1].replicas[0].zone, "zone-a");
  EXPECT_NE(plan_signature(in_order), plan_signature(beside));
  EXPECT_EQ(describe_plan(in_order), describe_plan(beside));  // same shapes, other zones
  // The tied all-reduce stays in zone-b: cheaper than across zones.
  const EvalContext context = world.context();
  EXPECT_LT(evaluate(beside, request.model, context).stages[2].timing.tied_sync_s,
            evaluate(in_order, request.model, context).stages[2].timing.tied_sync_s);
  ModelSpec untied = request.model;
  untied.tied_embeddings = false;
  SearchRequest untied_request = request;
  untied_request.model = untied;
  EXPECT_FALSE(tied_placement_differs(untied_request, pools, configs, choices));
}

// Grouping is a change of representation, not of the space: on small multi-region clusters the
// grouped search equals the per-(type, region) search and the oracle (which never groups), and
// every stage of its plans stays in one region.
TEST(SearchTest, PoolsGroupedAcrossRegionsMatchUngroupedAndExhaustive) {
  World world;
  const std::vector<SearchRequest> requests = {
      request_for(small_neo(), 8,
                  {{"A100-40", "r1-a", "r1", 4, 4}, {"A100-40", "r2-a", "r2", 4, 4},
                   {"V100-16", "r1-a", "r1", 4, 4}, {"V100-16", "r2-a", "r2", 2, 2}}),
      request_for(small_llama(), 8,
                  {{"A100-40", "r1-a", "r1", 2, 2}, {"A100-40", "r1-b", "r1", 2, 2},
                   {"A100-40", "r2-a", "r2", 4, 4}, {"V100-16", "r2-a", "r2", 4, 4}}),
  };
  for (const SearchRequest& request : requests) {
    expect_near_oracle(request, world);
    const SearchResult grouped = search_plans(request, world.context());
    SearchRequest per_region = request;
    per_region.options.group_pools_across_regions = false;
    const SearchResult ungrouped = search_plans(per_region, world.context());
    ASSERT_FALSE(grouped.plans.empty()) << grouped.failure;
    ASSERT_FALSE(ungrouped.plans.empty()) << ungrouped.failure;
    std::printf("  ungrouped: %s %.0f tok/s\n", describe_plan(ungrouped.plans.front().plan).c_str(),
                ungrouped.plans.front().evaluation.tokens_per_second);
    EXPECT_GE(grouped.plans.front().evaluation.tokens_per_second,
              ungrouped.plans.front().evaluation.tokens_per_second * (1 - 1e-9));
    std::map<std::string, std::string> region_of;
    for (const GpuPool& p : request.pools) region_of[p.zone] = p.region;
    for (const RankedPlan& ranked : grouped.plans)
      for (const Stage& stage : ranked.plan.stages)
        for (const Replica& replica : stage.replicas)
          EXPECT_EQ(region_of[replica.zone], region_of[stage.replicas.front().zone]) << describe_plan(ranked.plan);
  }
}

}  // namespace
}  // namespace flotilla::planner
