#include "scaler/cluster_state.h"

#include <algorithm>
#include <numeric>

namespace flotilla::scaler {

ClusterState::ClusterState(std::vector<SimNode> nodes) : nodes_(std::move(nodes)) {
  free_.reserve(nodes_.size());
  for (const auto& n : nodes_) {
    const int g = std::max(0, n.gpus);
    free_.push_back(g);
    free_total_ += g;
    capacity_total_ += g;
    max_node_gpus_ = std::max(max_node_gpus_, g);
  }
  up_.assign(nodes_.size(), true);
}

std::optional<Allocation> ClusterState::place_on(const std::vector<int>& free, int gpus,
                                                 bool may_span_nodes) {
  if (gpus <= 0) return Allocation{};
  int best = -1;
  for (int i = 0; i < static_cast<int>(free.size()); ++i) {
    if (free[i] >= gpus && (best < 0 || free[i] < free[best])) best = i;
  }
  if (best >= 0) return Allocation{{best, gpus}};
  if (!may_span_nodes) return std::nullopt;
  long total = 0;
  for (int f : free) total += f;
  if (total < gpus) return std::nullopt;
  std::vector<int> order(free.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return free[a] > free[b]; });
  Allocation a;
  int left = gpus;
  for (int i : order) {
    if (left <= 0 || free[i] <= 0) break;
    const int take = std::min(left, free[i]);
    a.emplace_back(i, take);
    left -= take;
  }
  return a;
}

std::optional<Allocation> ClusterState::place(int gpus, bool may_span_nodes) const {
  if (gpus > free_total_) return std::nullopt;
  return place_on(free_, gpus, may_span_nodes);
}

void ClusterState::take(const Allocation& a) {
  for (auto [node, n] : a) {
    free_[node] -= n;
    free_total_ -= n;
  }
}

void ClusterState::give(const Allocation& a) {
  for (auto [node, n] : a) {
    if (!up_[node]) continue;  // GPUs of a lost node do not come back
    free_[node] += n;
    free_total_ += n;
  }
}

void ClusterState::set_node_up(int node, bool up) {
  if (up_[node] == up) return;
  up_[node] = up;
  if (up) {
    free_[node] = nodes_[node].gpus;
    free_total_ += free_[node];
    capacity_total_ += nodes_[node].gpus;
  } else {
    free_total_ -= free_[node];
    free_[node] = 0;
    capacity_total_ -= nodes_[node].gpus;
  }
}

}  // namespace flotilla::scaler
