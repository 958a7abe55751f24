// plan_and_place(): one pure call from (model, request, cluster snapshot) to a placed plan or a
// typed reason. Hand-worked placements, worker constraints (TP 1, one TP for all stages, GPU
// count range), failures with a suggestion that plans when passed back, and determinism.
#include "planner/plan_and_place.h"

#include <gtest/gtest.h>

#include <set>

#include "planner/search_space.h"
#include "tests/planner/stage_dp_setup.h"

namespace flotilla::planner {
namespace {

ClusterNode node(std::string name, std::string gpu, int free_gpus, std::string zone = "z") {
  return ClusterNode{std::move(name), std::move(gpu), free_gpus, zone, zone};
}

// Two 8-GPU nodes, one A100-40 and one V100-16.
ClusterSpec one_a100_and_one_v100_node() {
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 8), node("v0", "V100-16", 8)};
  return cluster;
}

PlaceRequest request_for(ModelSpec model, int gbs) {
  PlaceRequest request;
  request.model = std::move(model);
  request.global_batch_size = gbs;
  request.worker.micro_batch_sizes = {1, 2, 4};
  request.max_plans = 4;
  return request;
}

// The Llama slice at global batch 16 under the reference worker's limits (TP 1).
PlaceRequest reference_worker_request() {
  PlaceRequest request = request_for(small_llama(), 16);
  request.worker = reference_worker_constraints();
  return request;
}

// Every (stage, replica) once, on a node of its GPU type and zone with a whole TP group, and no
// node giving more than it has free; gpus_by_node agrees with the placement.
void expect_valid_placement(const PlaceResult& result, const ClusterSpec& cluster) {
  ASSERT_TRUE(result.ok()) << result.message;
  const Plan& plan = result.plan().plan;
  std::set<std::pair<int, int>> seen;
  std::map<std::string, int> used;
  for (const GroupPlacement& group : result.placement) {
    ASSERT_LT(group.stage, plan.num_stages());
    const Stage& stage = plan.stages[group.stage];
    ASSERT_LT(group.replica, stage.dp());
    EXPECT_TRUE(seen.insert({group.stage, group.replica}).second) << "placed twice";
    EXPECT_EQ(group.gpus, stage.replica_tp(group.replica));
    const auto it = std::find_if(cluster.nodes.begin(), cluster.nodes.end(),
                                 [&](const ClusterNode& n) { return n.name == group.node; });
    ASSERT_NE(it, cluster.nodes.end()) << group.node;
    EXPECT_EQ(it->gpu_type, stage.replicas[group.replica].gpu_type);
    EXPECT_EQ(it->zone, stage.replicas[group.replica].zone);
    used[group.node] += group.gpus;
  }
  int groups = 0;
  for (const Stage& stage : plan.stages) groups += stage.dp();
  EXPECT_EQ(static_cast<int>(seen.size()), groups);
  EXPECT_EQ(used, result.gpus_by_node);
  for (const auto& [name, gpus] : used) {
    for (const ClusterNode& n : cluster.nodes) {
      if (n.name == name) {
        EXPECT_LE(gpus, n.gpus) << name << " over-committed";
      }
    }
  }
}

TEST(PlanAndPlace, MixedTypeStagePlacesEveryReplicaOnItsOwnType) {
  // Issue 13: 6 A100-40 + 2 A100-80 (same speed; search_test's mixed case). The best plan runs
  // one stage whose replicas mix both types; every replica lands on a node of its own type.
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a40", "A100-40", 6), node("a80", "A100-80", 2)};
  ModelSpec model = *find_preset("gpt-neo-2.7b");
  model.name = "gpt-neo-4l";
  model.num_layers = 4;
  PlaceRequest request = request_for(model, 512);
  request.worker.micro_batch_sizes = {1, 2, 4};
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  expect_valid_placement(result, cluster);
  bool mixed = false;
  for (const Stage& stage : result.plan().plan.stages)
    for (const Replica& r : stage.replicas) mixed = mixed || r.gpu_type != stage.replicas.front().gpu_type;
  EXPECT_TRUE(mixed) << describe_plan(result.plan().plan);
}

TEST(PlanAndPlace, OneGpuJobTakesTheBestFitNode) {
  // OPT-350M fits one A100-80 easily. Capped at 1 GPU, the plan is 1 stage x D 1 at TP 1, and
  // best fit puts it on the node with the fewest free GPUs that holds it: "one" (1 free), not
  // "big" (8 free) and not the T4 node (wrong type).
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("big", "A100-80", 8), node("one", "A100-80", 1), node("t4", "T4", 4)};
  PlaceRequest request = request_for(*find_preset("opt-350m"), 8);
  request.allowed_gpu_types = {"a100-80"};
  request.max_gpus = 1;
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  expect_valid_placement(result, cluster);
  ASSERT_EQ(result.placement.size(), 1u);
  EXPECT_EQ(result.placement[0].node, "one");
  EXPECT_EQ(result.placement[0].stage, 0);
  EXPECT_EQ(result.placement[0].gpus, 1);
  EXPECT_EQ(result.gpus_by_node, (std::map<std::string, int>{{"one", 1}}));
}

TEST(PlanAndPlace, FeasibleRequestPlacesEveryRankOnItsGpuTypeWithoutOvercommit) {
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 4), node("a1", "A100-40", 3), node("v0", "V100-16", 8),
                   node("v1", "V100-16", 2)};
  const PlaceResult result = plan_and_place(request_for(small_llama(), 16), cluster, world.context());
  expect_valid_placement(result, cluster);
  EXPECT_GE(result.search.plans.size(), 1u);
}

TEST(PlanAndPlace, GpuCountRangeIsRespected) {
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 8), node("a1", "A100-40", 8)};
  PlaceRequest request = request_for(small_llama(), 16);
  request.min_gpus = 3;
  request.max_gpus = 6;
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  expect_valid_placement(result, cluster);
  for (const RankedPlan& ranked : result.search.plans) {
    EXPECT_GE(ranked.plan.num_gpus(), 3) << describe_plan(ranked.plan);
    EXPECT_LE(ranked.plan.num_gpus(), 6) << describe_plan(ranked.plan);
  }
}

TEST(PlanAndPlace, ReferenceWorkerGetsOnlyTpOneStages) {
  const World world;
  const ClusterSpec cluster = one_a100_and_one_v100_node();
  PlaceRequest request = reference_worker_request();
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  expect_valid_placement(result, cluster);
  for (const RankedPlan& ranked : result.search.plans)
    for (const Stage& stage : ranked.plan.stages) EXPECT_EQ(stage.tp, 1) << describe_plan(ranked.plan);
}

// A strict rescale keeps the data-parallel degree: with dp_degrees = {2}, every ranked plan has
// two replicas per stage, and the same request without it finds plans with other degrees.
TEST(PlanAndPlace, FixedDataParallelDegreeIsKept) {
  const World world;
  const ClusterSpec cluster = one_a100_and_one_v100_node();
  PlaceRequest request = reference_worker_request();
  request.worker.dp_degrees = {2};
  const PlaceResult fixed = plan_and_place(request, cluster, world.context());
  expect_valid_placement(fixed, cluster);
  for (const RankedPlan& ranked : fixed.search.plans)
    for (const Stage& stage : ranked.plan.stages) EXPECT_EQ(stage.dp(), 2) << describe_plan(ranked.plan);
  request.worker.dp_degrees = {};
  const PlaceResult free = plan_and_place(request, cluster, world.context());
  ASSERT_TRUE(free.ok()) << free.message;
  bool other_degree = false;
  for (const RankedPlan& ranked : free.search.plans) other_degree |= ranked.plan.stages[0].dp() != 2;
  EXPECT_TRUE(other_degree) << "the unconstrained search should rank plans with other DP degrees";
}

TEST(PlanAndPlace, MegatronWorkerGetsOneTpForAllStages) {
  // V100-16 cannot hold the slice whole; mixing V100 and A100 stages at different TP degrees
  // is what the free search may do, one TP for the whole plan is what Megatron-LM runs.
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 2), node("v0", "V100-16", 8), node("v1", "V100-16", 8)};
  PlaceRequest request = request_for(small_llama(), 16);
  request.worker = megatron_constraints();
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  expect_valid_placement(result, cluster);
  for (const RankedPlan& ranked : result.search.plans)
    for (const Stage& stage : ranked.plan.stages)
      EXPECT_EQ(stage.tp, ranked.plan.stages.front().tp) << describe_plan(ranked.plan);
  // Ranked by the objective across the TP degrees tried.
  for (std::size_t i = 1; i < result.search.plans.size(); ++i)
    EXPECT_GE(result.search.plans[i - 1].evaluation.tokens_per_second,
              result.search.plans[i].evaluation.tokens_per_second * (1 - 1e-9));
}

TEST(PlanAndPlace, TooFewFreeGpusSuggestsAChangeThatPlansWhenRerun) {
  // One free V100-16 cannot hold ~19 GB of state; two (a 2-stage pipeline, ~9.6 GB each) can.
  // Sequences of 512 tokens keep activations small (~0.1 GB per layer and micro-batch), so
  // weights decide. Recompute does not shrink weights and a 1-GPU node allows no TP, so the
  // smallest change is one more GPU.
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("v0", "V100-16", 1)};
  ModelSpec model = small_llama();
  model.seq_len = 512;
  const PlaceRequest request = request_for(model, 16);
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.failure == PlaceFailure::kNotEnoughFreeGpus ||
              result.failure == PlaceFailure::kFitsNowhere)
      << to_string(result.failure);
  EXPECT_EQ(result.failure, PlaceFailure::kNotEnoughFreeGpus) << result.message;
  EXPECT_EQ(result.message.find('\n'), std::string::npos);
  ASSERT_TRUE(result.suggestion.has_value()) << result.message;
  EXPECT_EQ(result.suggestion->kind, ChangeKind::kMoreGpus);
  EXPECT_NE(result.message.find(result.suggestion->change), std::string::npos);
  const PlaceResult again =
      plan_and_place(result.suggestion->request, result.suggestion->cluster, world.context());
  expect_valid_placement(again, result.suggestion->cluster);
}

TEST(PlanAndPlace, ModelTooBigForTheTypeSuggestsALargerType) {
  // Llama-2-70B: one layer alone is ~15.5 GB of state at 18 B/parameter, more than a T4 holds
  // at TP 1 (the nodes have 1 GPU, so no TP); only a larger-memory type fits.
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("t0", "T4", 1), node("t1", "T4", 1)};
  PlaceRequest request = request_for(*find_preset("llama-2-70b"), 64);
  const PlaceResult result = plan_and_place(request, cluster, world.context());
  ASSERT_FALSE(result.ok());
  if (!result.suggestion) GTEST_SKIP() << "no suggestion: " << result.message;
  EXPECT_NE(result.suggestion->kind, ChangeKind::kMoreGpus);
  EXPECT_EQ(result.failure, PlaceFailure::kFitsNowhere) << result.message;
}

TEST(PlanAndPlace, TypedFailuresForBadInputs) {
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 8)};
  PlaceRequest unknown_model;
  unknown_model.model_name = "no-such-model";
  unknown_model.global_batch_size = 8;
  EXPECT_EQ(plan_and_place(unknown_model, cluster, world.context()).failure, PlaceFailure::kUnknownModel);
  PlaceRequest preset = unknown_model;
  preset.model_name = "OPT-350";
  EXPECT_TRUE(plan_and_place(preset, cluster, world.context()).ok());

  PlaceRequest unknown_gpu = request_for(small_llama(), 16);
  unknown_gpu.allowed_gpu_types = {"A100-40", "Z100"};
  const PlaceResult gpu = plan_and_place(unknown_gpu, cluster, world.context());
  EXPECT_EQ(gpu.failure, PlaceFailure::kUnknownGpuType);
  EXPECT_NE(gpu.message.find("Z100"), std::string::npos);

  PlaceRequest odd = request_for(small_llama(), 7);
  odd.worker.micro_batch_sizes = {2, 4};
  EXPECT_EQ(plan_and_place(odd, cluster, world.context()).failure, PlaceFailure::kBatchNotDivisible);

  PlaceRequest range = request_for(small_llama(), 16);
  range.min_gpus = 8;
  range.max_gpus = 4;
  EXPECT_EQ(plan_and_place(range, cluster, world.context()).failure, PlaceFailure::kInvalidRequest);

  PlaceRequest too_many = request_for(small_llama(), 16);
  too_many.min_gpus = 16;
  too_many.suggest = false;
  EXPECT_EQ(plan_and_place(too_many, cluster, world.context()).failure, PlaceFailure::kNotEnoughFreeGpus);

  PlaceRequest poor = request_for(small_llama(), 16);
  poor.constraints.max_usd_per_iteration = 1e-9;
  const PlaceResult budget = plan_and_place(poor, cluster, world.context());
  EXPECT_EQ(budget.failure, PlaceFailure::kConstraintsUnmet) << budget.message;
  if (budget.suggestion) {
    EXPECT_EQ(budget.suggestion->kind, ChangeKind::kRaiseBudget);
    EXPECT_TRUE(plan_and_place(budget.suggestion->request, budget.suggestion->cluster, world.context()).ok());
  }
}

TEST(PlanAndPlace, SameInputsGiveTheSameResult) {
  const World world;
  ClusterSpec cluster;
  cluster.nodes = {node("a0", "A100-40", 4), node("a1", "A100-40", 4), node("v0", "V100-16", 8),
                   node("v1", "V100-16", 8, "y")};
  const PlaceRequest request = request_for(small_llama(), 32);
  const PlaceResult a = plan_and_place(request, cluster, world.context());
  const PlaceResult b = plan_and_place(request, cluster, world.context());
  ASSERT_TRUE(a.ok()) << a.message;
  ASSERT_EQ(a.search.plans.size(), b.search.plans.size());
  for (std::size_t i = 0; i < a.search.plans.size(); ++i) {
    EXPECT_EQ(describe_plan(a.search.plans[i].plan), describe_plan(b.search.plans[i].plan));
    EXPECT_EQ(a.search.plans[i].evaluation.iter_seconds, b.search.plans[i].evaluation.iter_seconds);
  }
  EXPECT_EQ(a.chosen, b.chosen);
  ASSERT_EQ(a.placement.size(), b.placement.size());
  for (std::size_t i = 0; i < a.placement.size(); ++i) {
    EXPECT_EQ(a.placement[i].stage, b.placement[i].stage);
    EXPECT_EQ(a.placement[i].replica, b.placement[i].replica);
    EXPECT_EQ(a.placement[i].node, b.placement[i].node);
  }
  EXPECT_EQ(a.gpus_by_node, b.gpus_by_node);
  EXPECT_EQ(a.not_placed, b.not_placed);
}

}  // namespace
}  // namespace flotilla::planner
