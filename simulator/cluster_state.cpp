#include "simulator/cluster_state.h"

#include <algorithm>
#include <cstdio>

#include "planner/packer.h"

namespace flotilla::simulator {

ClusterState::ClusterState(std::vector<SimNode> nodes) : nodes_(std::move(nodes)) {
  free_.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    int t = type_id(n.gpu_type);
    if (t < 0) {
      t = static_cast<int>(types_.size());
      types_.push_back(n.gpu_type);
      nodes_of_type_.emplace_back();
      free_by_type_.push_back(0);
      capacity_by_type_.push_back(0);
      all_capacity_by_type_.push_back(0);
      max_node_gpus_.push_back(0);
    }
    const int g = std::max(0, n.gpus);
    node_type_.push_back(t);
    nodes_of_type_[t].push_back(static_cast<int>(i));
    char name[24];
    std::snprintf(name, sizeof name, "%09zu", i);
    packer_names_.emplace_back(name);
    free_.push_back(g);
    free_total_ += g;
    capacity_total_ += g;
    free_by_type_[t] += g;
    capacity_by_type_[t] += g;
    all_capacity_by_type_[t] += g;
    max_node_gpus_[t] = std::max(max_node_gpus_[t], g);
  }
  up_.assign(nodes_.size(), true);
}

int ClusterState::type_id(const std::string& gpu_type) const {
  for (size_t t = 0; t < types_.size(); ++t)
    if (types_[t] == gpu_type) return static_cast<int>(t);
  return -1;
}

std::optional<Allocation> ClusterState::pack(const std::vector<int>& free, int gpus,
                                             bool may_span_nodes, int type) const {
  if (gpus <= 0) return Allocation{};
  if (type < 0 || type >= static_cast<int>(types_.size())) return std::nullopt;
  // Cheap rejection first: most calls are for a queue head that still does not fit.
  long total = 0;
  int largest = 0, usable = 0;
  for (int i : nodes_of_type_[type]) {
    if (free[i] <= 0) continue;
    total += free[i];
    largest = std::max(largest, free[i]);
    ++usable;
  }
  if (total < gpus || (!may_span_nodes && largest < gpus)) return std::nullopt;
  std::vector<planner::FreeNode> candidates;
  candidates.reserve(usable);
  for (int i : nodes_of_type_[type])
    if (free[i] > 0) candidates.push_back({packer_names_[i], types_[type], std::string(), free[i]});
  planner::PlacementRequest request;
  request.demands.push_back({types_[type], "", gpus, may_span_nodes ? 1 : gpus});
  std::vector<planner::NodeAllocation> placed;
  std::string why;
  if (!planner::place_request(request, candidates, placed, why)) return std::nullopt;
  Allocation a;
  for (const auto& p : placed) a.emplace_back(std::stoi(p.node), p.gpus);
  return a;
}

std::optional<Allocation> ClusterState::place(int gpus, bool may_span_nodes, int type) const {
  return pack(free_, gpus, may_span_nodes, type);
}

std::optional<Allocation> ClusterState::place_on(const std::vector<int>& free, int gpus,
                                                 int type) const {
  if (type < 0 || type >= static_cast<int>(types_.size())) return std::nullopt;
  return pack(free, gpus, gpus > max_node_gpus_[type], type);
}

void ClusterState::take(const Allocation& a) {
  for (auto [node, n] : a) {
    free_[node] -= n;
    free_total_ -= n;
    free_by_type_[node_type_[node]] -= n;
  }
}

void ClusterState::give(const Allocation& a) {
  for (auto [node, n] : a) {
    if (!up_[node]) continue;  // GPUs of a lost node do not come back
    free_[node] += n;
    free_total_ += n;
    free_by_type_[node_type_[node]] += n;
  }
}

void ClusterState::set_node_up(int node, bool up) {
  if (up_[node] == up) return;
  up_[node] = up;
  const int t = node_type_[node];
  const int g = std::max(0, nodes_[node].gpus);
  if (up) {
    free_[node] = g;
    free_total_ += g;
    free_by_type_[t] += g;
    capacity_total_ += g;
    capacity_by_type_[t] += g;
  } else {
    free_total_ -= free_[node];
    free_by_type_[t] -= free_[node];
    free_[node] = 0;
    capacity_total_ -= g;
    capacity_by_type_[t] -= g;
  }
}

}  // namespace flotilla::simulator
