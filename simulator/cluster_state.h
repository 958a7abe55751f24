// Free GPUs per node and GPU type of a simulated cluster, placed with the planner's best-fit
// packer (Frenzy HAS, planner/packer.h).
//
// place(): GPUs of ONE type. A request no larger than a node must sit on one node (real jobs of
//   <= 8 GPUs do not span nodes): the packer takes the node of that type with the fewest free
//   GPUs that still fits (best fit). Larger requests may span nodes: while no single node holds
//   what is left, the packer takes the node with the most free GPUs, then best-fits the rest.
// Guarantees: take/give keep 0 <= free <= capacity on every up node, never hand out a GPU twice
//   and keep the per-type free counts in step; placements never mix GPU types; place() is const
//   and deterministic (the packer breaks ties by node name; we pass it zero-padded node indices,
//   so ties go to the lower index).
// Caveats: zones are carried but not constrained (trace jobs name none).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla::simulator {

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

  // GPU types in order of first appearance in the node list; ids index this vector.
  const std::vector<std::string>& types() const { return types_; }
  int type_id(const std::string& gpu_type) const;  // -1 when no node has it
  int node_type(int node) const { return node_type_[node]; }

  std::optional<Allocation> place(int gpus, bool may_span_nodes, int type) const;
  // place() for a request, spanning allowed only above the largest node of that type.
  std::optional<Allocation> place_job(int gpus, int type) const {
    return place(gpus, gpus > max_node_gpus_[type], type);
  }
  // Dry run on another free vector (one entry per node), e.g. after a planned preemption.
  std::optional<Allocation> place_on(const std::vector<int>& free, int gpus, int type) const;
  void take(const Allocation& a);
  void give(const Allocation& a);

  void set_node_up(int node, bool up);  // a lost node's GPUs vanish; the caller frees its jobs
  bool node_up(int node) const { return up_[node]; }

  int free_total() const { return free_total_; }
  int capacity_total() const { return capacity_total_; }
  int free_of_type(int type) const { return free_by_type_[type]; }
  int capacity_of_type(int type) const { return capacity_by_type_[type]; }  // nodes up now
  int nodes_capacity_of_type(int type) const { return all_capacity_by_type_[type]; }
  int free_on(int node) const { return free_[node]; }
  const std::vector<SimNode>& nodes() const { return nodes_; }
  const std::vector<int>& free_per_node() const { return free_; }

 private:
  std::optional<Allocation> pack(const std::vector<int>& free, int gpus, bool may_span_nodes,
                                 int type) const;

  std::vector<SimNode> nodes_;
  std::vector<std::string> types_;
  std::vector<int> node_type_;
  std::vector<std::vector<int>> nodes_of_type_;
  std::vector<std::string> packer_names_;  // zero-padded node indices
  std::vector<int> free_;
  std::vector<bool> up_;
  std::vector<int> free_by_type_, capacity_by_type_, all_capacity_by_type_, max_node_gpus_;
  int free_total_ = 0;
  int capacity_total_ = 0;
};

}  // namespace flotilla::simulator
