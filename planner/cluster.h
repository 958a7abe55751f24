// A cluster as the planner sees it: nodes with free GPUs of one type, in a zone and a region.
//
// Guarantees: parse_cluster() accepts the cluster.yaml format below and returns either a
//   cluster whose every node names a catalog GPU type with a positive count, or one line that
//   says what is wrong and where ("node 'a3': count must be a positive integer, got -2"); a
//   cluster of more than 1,000,000 GPUs in all is refused (the pools count GPUs in int).
//   gpu_pools() groups nodes by (GPU type, zone); free_nodes() gives the packer's view.
// Assumes: the text is already read (the CLI reads the file, common/text_file.h).
// Caveats: a node has one GPU type (true of every cloud instance we know); counts are the GPUs
//   free for this job, not the node's size.
//
// Format (YAML or JSON):
//   nodes:                       # one entry per node
//     - {name: a100-0, gpu: A100-40, count: 8, zone: us-central1-a, region: us-central1}
//   pools:                       # or compact: N identical nodes
//     - {gpu: V100-16, nodes: 12, gpus_per_node: 8, zone: us-central1-a}
//   limits:                      # optional quotas (Sailor's per type / per zone maxima)
//     max_gpus_per_type: {A100-40: 64}
//     max_gpus_per_zone: {us-central1-a: 96}
// zone defaults to "default"; region defaults to the zone (H6 merges zones of one region);
// gpus_per_node defaults to the catalog's node size for that GPU type.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "planner/gpu_catalog.h"
#include "planner/packer.h"
#include "planner/result.h"

namespace flotilla::planner {

struct ClusterNode {
  std::string name;
  std::string gpu_type;  // catalog's canonical name
  int gpus = 0;
  std::string zone;
  std::string region;
};

struct ClusterSpec {
  std::vector<ClusterNode> nodes;
  std::map<std::string, int> max_gpus_per_type;
  std::map<std::string, int> max_gpus_per_zone;
};

// Free GPUs of one type in one zone, and the largest node there (bounds TP, H1).
struct GpuPool {
  std::string gpu_type;
  std::string zone;
  std::string region;
  int gpus = 0;
  int largest_node_gpus = 0;
};

Result<ClusterSpec> parse_cluster(std::string_view yaml_text, const GpuCatalog& catalog);

std::vector<GpuPool> gpu_pools(const ClusterSpec& cluster);
std::vector<FreeNode> free_nodes(const ClusterSpec& cluster);

}  // namespace flotilla::planner
