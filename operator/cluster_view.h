// The cluster as one reconcile sees it: GPU nodes (type, zone, capacity, health) and the GPUs
// every pod holds, built from the informer caches' Node and Pod objects.
//
// Guarantees: pure. A node counts as healthy when its Ready condition is True and it is not
//   being deleted or cordoned; its GPU type is the catalog's canonical name for the
//   `nvidia.com/gpu.product` label (aliases and case folded), or "" when unknown. A pod holds
//   its `nvidia.com/gpu` limit (else request) on its node until it is Succeeded or Failed.
// Assumes: one GPU type per node (true of every cloud instance type).
// Caveats: GPUs of a pod being deleted stay held until the pod is gone (the kubelet's view).
// Cost: O((nodes + pods) log nodes), so a reconcile stays cheap on 1,000 nodes
//   (bench/operator_scale).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/cluster.h"
#include "planner/gpu_catalog.h"

namespace flotilla::op {

struct NodeView {
  std::string name;
  std::string gpu_type;  // catalog name; "" when the label names no catalog type
  std::string zone;
  int gpus = 0;  // allocatable
  bool healthy = false;
  std::map<std::string, int> held_by_job;  // "<ns>/<job label>" ("" for pods of no job) -> GPUs
  int held() const;
};

struct ClusterView {
  std::vector<NodeView> nodes;
  // Node name -> index in `nodes`, filled by build_cluster_view(); find() checks each hit and
  // scans when the index is missing or stale (views built by hand), so it is never wrong.
  std::map<std::string, std::size_t> index_by_name;
  const NodeView* find(const std::string& name) const;  // O(log nodes) on a built view
  // Free GPUs by type on healthy nodes (what no pod holds).
  std::map<std::string, int> free_by_type() const;
  // The planner's snapshot for one job: healthy nodes of known type with the GPUs free to it,
  // i.e. not held by other jobs' pods; the job's own pods' GPUs count as free unless
  // `exclude_own` is set. Nodes named in `leave_out` are not in it (unavailable_nodes.h).
  planner::ClusterSpec snapshot_for(const std::string& job_key, bool exclude_own = false,
                                    const std::set<std::string>& leave_out = {}) const;
};

int pod_gpus(const nlohmann::json& pod);

// The pieces of build_cluster_view(), for callers that visit the caches without copying them:
// add every node first (add_node_to_view), then every pod (add_pod_to_view).
void add_node_to_view(ClusterView& view, const nlohmann::json& node, const planner::GpuCatalog& catalog);
void add_pod_to_view(ClusterView& view, const nlohmann::json& pod, const std::string& job_label);

ClusterView build_cluster_view(const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods,
                               const planner::GpuCatalog& catalog, const std::string& job_label);

}  // namespace flotilla::op
