// nodes.yaml parsing: what the virtual nodes get, and one clear error for each kind of bad
// entry (never an exception).
#include <gtest/gtest.h>

#include "devcluster/nodes_file.h"

using flotilla::devcluster::NodeSpec;
using flotilla::devcluster::parse_nodes_yaml;

namespace {
std::string parse_error(const std::string& yaml) {
  std::vector<NodeSpec> nodes;
  std::string error;
  EXPECT_FALSE(parse_nodes_yaml(yaml, &nodes, &error)) << yaml;
  return error;
}
}  // namespace

TEST(DevclusterNodesFile, ListAndMappingFormsGiveTheSameNodes) {
  for (const char* yaml : {"- {name: a, gpuType: A100, gpuCount: 8, zone: z1, cudaVisibleDevices: true}\n",
                           "nodes:\n  - {name: a, gpuType: A100, gpuCount: 8, zone: z1, cudaVisibleDevices: true}\n"}) {
    std::vector<NodeSpec> nodes;
    std::string error;
    ASSERT_TRUE(parse_nodes_yaml(yaml, &nodes, &error)) << error;
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].name, "a");
    EXPECT_EQ(nodes[0].gpu_type, "A100");
    EXPECT_EQ(nodes[0].gpu_count, 8);
    EXPECT_EQ(nodes[0].zone, "z1");
    EXPECT_EQ(nodes[0].cpu, "32");
    EXPECT_TRUE(nodes[0].cuda_visible_devices);
  }
}

TEST(DevclusterNodesFile, BadEntriesGetOneLineNamingEntryAndField) {
  EXPECT_NE(parse_error("nodes: [{name: a, gpuCont: 8}]").find("nodes[0]: node a: unknown field `gpuCont`"),
            std::string::npos);
  EXPECT_NE(parse_error("- {name: a, cudaVisibleDevices: yes}").find("node a: cudaVisibleDevices must be true or false"),
            std::string::npos);
  EXPECT_NE(parse_error("- {name: a, gpuCount: -1}").find("gpuCount must be a non-negative integer"), std::string::npos);
  EXPECT_NE(parse_error("- {name: a, gpuCount: eight}").find("gpuCount must be a non-negative integer"), std::string::npos);
  EXPECT_NE(parse_error("- {name: a}\n- {name: a}").find("nodes[1]: duplicate node name a"), std::string::npos);
  EXPECT_NE(parse_error("- {gpuCount: 8}").find("nodes[0]: a node entry has no `name`"), std::string::npos);
  EXPECT_NE(parse_error("nodes: [{name: a").find("not valid YAML"), std::string::npos);
  EXPECT_NE(parse_error("nodes: 3").find("must be a list of nodes"), std::string::npos);
}
