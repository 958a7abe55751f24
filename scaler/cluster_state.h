// Free GPUs per node of a simulated cluster, with best-fit placement (Frenzy HAS, Alg. 1 step 2).
//
// place(): if one node can hold the request (and single-node placement is allowed), take the
//   node with the fewest free GPUs that still fits (best fit); otherwise take nodes greedily from
//   the one with the most free GPUs until the request is met. Requests no larger than a node
//   must be single-node (real jobs of <= 8 GPUs do not span nodes); larger ones may span.
// Guarantees: take/give keep 0 <= free <= capacity on every up node and never hand out a GPU
//   twice; place() is const and deterministic (ties: lower node index).
// Caveats: GPU types are not distinguished (the ElasticFlow clusters are homogeneous; for the
//   Alibaba node list the GPU model is carried but not matched).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla::scaler {

struct SimNode {
  std::string name;
  std::string gpu_type;
  std::string zone;
  int gpus = 0;
};

using Allocation = std::vector<std::pair<int, int>>;  // (node index, GPUs on it)

class ClusterState {
 public:
  explicit ClusterState(std::vector<SimNode> nodes);

  std::optional<Allocation> place(int gpus, bool may_span_nodes) const;
  // place() for a request, spanning allowed only above the largest node size.
  std::optional<Allocation> place_job(int gpus) const { return place(gpus, gpus > max_node_gpus_); }
  void take(const Allocation& a);
  void give(const Allocation& a);

  void set_node_up(int node, bool up);  // a lost node's GPUs vanish; the caller frees its jobs
  bool node_up(int node) const { return up_[node]; }

  int free_total() const { return free_total_; }
  int capacity_total() const { return capacity_total_; }
  int free_on(int node) const { return free_[node]; }
  const std::vector<SimNode>& nodes() const { return nodes_; }
  const std::vector<int>& free_per_node() const { return free_; }
  int max_node_gpus() const { return max_node_gpus_; }

  // Static helper for dry runs on a copy of the free vector.
  static std::optional<Allocation> place_on(const std::vector<int>& free, int gpus,
                                            bool may_span_nodes);

 private:
  std::vector<SimNode> nodes_;
  std::vector<int> free_;
  std::vector<bool> up_;
  int free_total_ = 0;
  int capacity_total_ = 0;
  int max_node_gpus_ = 0;
};

}  // namespace flotilla::scaler
