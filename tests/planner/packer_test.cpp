// Frenzy HAS (Algorithm 1) best-fit packing, checked on hand-worked cases.
#include "planner/packer.h"

#include <gtest/gtest.h>

namespace flotilla::planner {
namespace {

std::vector<FreeNode> three_a100_nodes() {
  return {{"n8", "A100-40", "a", 8}, {"n4", "A100-40", "a", 4}, {"n2", "A100-40", "a", 2}};
}

PlacementRequest one(std::string type, int gpus, std::string zone = "", int group = 1) {
  return PlacementRequest{{GpuDemand{std::move(type), std::move(zone), gpus, group}}};
}

TEST(PackerTest, SingleNodeBestFitPicksTheExactNode) {
  const PackResult result = pack_first_feasible({one("A100-40", 4)}, three_a100_nodes());
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(gpus_by_node(result.allocations), (std::map<std::string, int>{{"n4", 4}}));
}

TEST(PackerTest, SingleNodeBestFitPicksTheSmallestThatHoldsAll) {
  // 3 fits on n8 and n4; best fit is the one with the fewest free GPUs: n4.
  const PackResult result = pack_first_feasible({one("A100-40", 3)}, three_a100_nodes());
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(gpus_by_node(result.allocations), (std::map<std::string, int>{{"n4", 3}}));
}

TEST(PackerTest, SpillsFromLargestThenBestFitsTheRest) {
  // 10 fits no single node: take n8 (largest), then 2 left, whose best fit is n2, not n4.
  const PackResult result = pack_first_feasible({one("A100-40", 10)}, three_a100_nodes());
  ASSERT_TRUE(result.placed);
  ASSERT_EQ(result.allocations.size(), 2u);
  EXPECT_EQ(result.allocations[0].node, "n8");
  EXPECT_EQ(result.allocations[0].gpus, 8);
  EXPECT_EQ(result.allocations[1].node, "n2");
  EXPECT_EQ(result.allocations[1].gpus, 2);
}

TEST(PackerTest, TakesEverythingWhenRequestEqualsTotal) {
  const PackResult result = pack_first_feasible({one("A100-40", 14)}, three_a100_nodes());
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(gpus_by_node(result.allocations),
            (std::map<std::string, int>{{"n8", 8}, {"n4", 4}, {"n2", 2}}));
}

TEST(PackerTest, InfeasiblePlanFallsThroughToTheNextRankedPlan) {
  const PackResult result =
      pack_first_feasible({one("A100-40", 15), one("H100-80", 1), one("A100-40", 6)},
                          three_a100_nodes());
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(result.request_index, 2u);
  ASSERT_EQ(result.rejections.size(), 2u);
  EXPECT_NE(result.rejections[0].find("plan 0"), std::string::npos);
  EXPECT_NE(result.rejections[0].find("15 A100-40"), std::string::npos);
  EXPECT_NE(result.rejections[1].find("H100-80"), std::string::npos);
  // 6: no single node but n8 holds it; best fit is n8.
  EXPECT_EQ(gpus_by_node(result.allocations), (std::map<std::string, int>{{"n8", 6}}));
}

TEST(PackerTest, NothingFitsReportsEveryPlan) {
  const PackResult result = pack_first_feasible({one("A100-40", 15), one("V100-16", 1)},
                                                three_a100_nodes());
  EXPECT_FALSE(result.placed);
  EXPECT_EQ(result.rejections.size(), 2u);
  EXPECT_TRUE(result.allocations.empty());
}

TEST(PackerTest, RespectsGpuType) {
  const std::vector<FreeNode> nodes = {{"a", "A100-40", "z", 4}, {"v", "V100-16", "z", 8}};
  const PackResult result = pack_first_feasible({one("V100-16", 4)}, nodes);
  ASSERT_TRUE(result.placed);
  EXPECT_EQ(gpus_by_node(result.allocations), (std::map<std::string, int>{{"v", 4}}));
}

TEST(PackerTest, RespectsZoneAndAnyZoneTakesTheBestFit) {
  const std::vector<FreeNode> nodes = {{"a8", "A100-40", "a", 8}, {"b4", "A100-40", "b", 4}};
  const PackResult in_a = pack_first_feasible({one("A100-40", 4, "a")}, nodes);
  ASSERT_TRUE(in_a.placed);
  EXPECT_EQ(gpus_by_node(in_a.allocations), (std::map<std::string, int>{{"a8", 4}}));
  const PackResult anywhere = pack_first_feasible({one("A100-40", 4)}, nodes);
  ASSERT_TRUE(anywhere.placed);
  EXPECT_EQ(gpus_by_node(anywhere.allocations), (std::map<std::string, int>{{"b4", 4}}));
  const PackResult too_many_in_b = pack_first_feasible({one("A100-40", 5, "b")}, nodes);
  EXPECT_FALSE(too_many_in_b.placed);
}

TEST(PackerTest, NeverSplitsATensorParallelGroupAcrossNodes) {
  const std::vector<FreeNode> nodes = {{"x", "A100-40", "a", 6}, {"y", "A100-40", "a", 6}};
  // 12 GPUs are free, but only one whole group of 4 fits per node.
  EXPECT_FALSE(pack_first_feasible({one("A100-40", 12, "", 4)}, nodes).placed);
  const PackResult eight = pack_first_feasible({one("A100-40", 8, "", 4)}, nodes);
  ASSERT_TRUE(eight.placed);
  EXPECT_EQ(gpus_by_node(eight.allocations), (std::map<std::string, int>{{"x", 4}, {"y", 4}}));
}

TEST(PackerTest, DemandsOfOnePlanShareNodesWithoutOverAllocating) {
  // Two stages on A100 (TP 2 x 3 replicas, TP 1 x 2 replicas) and one on V100.
  const PlacementRequest plan{{{"A100-40", "", 2, 1}, {"A100-40", "", 6, 2}, {"V100-16", "", 3, 1}}};
  const std::vector<FreeNode> nodes = {
      {"a1", "A100-40", "z", 4}, {"a2", "A100-40", "z", 4}, {"v1", "V100-16", "z", 4}};
  const PackResult result = pack_first_feasible({plan}, nodes);
  ASSERT_TRUE(result.placed);
  const auto by_node = gpus_by_node(result.allocations);
  EXPECT_EQ(by_node.at("a1") + by_node.at("a2"), 8);
  EXPECT_LE(by_node.at("a1"), 4);
  EXPECT_LE(by_node.at("a2"), 4);
  EXPECT_EQ(by_node.at("v1"), 3);
  for (const NodeAllocation& allocation : result.allocations) {
    EXPECT_EQ(allocation.gpus % plan.demands[allocation.demand_index].gpus_per_group, 0);
  }
}

TEST(PackerTest, InvalidDemandIsRejectedNotCrashed) {
  const PackResult result = pack_first_feasible({one("A100-40", 5, "", 2)}, three_a100_nodes());
  EXPECT_FALSE(result.placed);
  ASSERT_EQ(result.rejections.size(), 1u);
  EXPECT_NE(result.rejections[0].find("invalid"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::planner
