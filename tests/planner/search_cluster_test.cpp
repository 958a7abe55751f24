// cluster.yaml parsing (planner/cluster.h): both forms, defaults, limits, and one-line errors.
#include "planner/cluster.h"

#include <gtest/gtest.h>

namespace flotilla::planner {
namespace {

TEST(SearchClusterTest, NodesAndPoolsFormsWithDefaults) {
  const GpuCatalog catalog = builtin_gpu_catalog();
  const auto cluster = parse_cluster(R"(
nodes:
  - {name: a0, gpu: a100, count: 8, zone: us-central1-a, region: us-central1}
  - {name: a1, gpu: A100-40, count: 2, zone: us-central1-b, region: us-central1}
pools:
  - {gpu: V100-16, nodes: 3, zone: us-west1-a}
limits:
  max_gpus_per_type: {v100: 8}
  max_gpus_per_zone: {us-west1-a: 10}
)", catalog);
  ASSERT_TRUE(cluster.ok()) << cluster.error();
  ASSERT_EQ(cluster->nodes.size(), 5u);
  EXPECT_EQ(cluster->nodes[0].gpu_type, "A100-40");  // alias resolved to the catalog name
  EXPECT_EQ(cluster->nodes[2].name, "V100-16-us-west1-a-0");
  EXPECT_EQ(cluster->nodes[2].gpus, catalog.find("V100-16")->gpus_per_node);  // catalog node size
  EXPECT_EQ(cluster->nodes[2].region, "us-west1-a");                       // region = zone
  EXPECT_EQ(cluster->max_gpus_per_type.at("V100-16"), 8);
  EXPECT_EQ(cluster->max_gpus_per_zone.at("us-west1-a"), 10);

  const std::vector<GpuPool> pools = gpu_pools(*cluster);
  ASSERT_EQ(pools.size(), 3u);  // A100 in two zones, V100 in one
  int a100 = 0, largest = 0;
  for (const GpuPool& pool : pools) {
    if (pool.gpu_type == "A100-40") {
      a100 += pool.gpus;
      largest = std::max(largest, pool.largest_node_gpus);
      EXPECT_EQ(pool.region, "us-central1");
    }
  }
  EXPECT_EQ(a100, 10);
  EXPECT_EQ(largest, 8);
  EXPECT_EQ(free_nodes(*cluster).size(), 5u);
}

TEST(SearchClusterTest, BadInputIsOneLineNamingTheField) {
  const GpuCatalog catalog = builtin_gpu_catalog();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nodes:\n  - {name: n, gpu: Z100, count: 8}\n", "unknown GPU type 'Z100'"},
      {"nodes:\n  - {name: n, gpu: T4, count: 0}\n", "'count' must be a positive integer"},
      {"nodes:\n  - {name: n, gpu: T4, count: 2.5}\n", "'count' must be a positive integer"},
      {"nodes:\n  - {gpu: T4, count: 2}\n", "missing 'name'"},
      {"nodes:\n  - {name: n, gpu: T4, count: 2}\n  - {name: n, gpu: T4, count: 2}\n", "duplicate node name 'n'"},
      {"pools:\n  - {gpu: T4, nodes: -1}\n", "'nodes' must be a positive integer"},
      {"nodes: 3\n", "'nodes' must be a list"},
      {"[1, 2]\n", "must be a map"},
      {"nodes: [ {name: x,\n", "does not parse"},
      {"limits: {max_gpus_per_type: {T4: -3}}\nnodes:\n  - {name: n, gpu: T4, count: 2}\n", "positive integer"},
  };
  for (const auto& [text, needle] : cases) {
    const auto cluster = parse_cluster(text, catalog);
    ASSERT_FALSE(cluster.ok()) << text;
    EXPECT_NE(cluster.error().find(needle), std::string::npos) << text << " -> " << cluster.error();
    EXPECT_EQ(cluster.error().find('\n'), std::string::npos) << cluster.error();
  }
}

}  // namespace
}  // namespace flotilla::planner
