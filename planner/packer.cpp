#include "planner/packer.h"

#include <algorithm>
#include <numeric>

namespace flotilla::planner {
namespace {

bool matches(const FreeNode& node, const GpuDemand& demand) {
  return node.gpu_type == demand.gpu_type && (demand.zone.empty() || node.zone == demand.zone);
}

std::string describe(const GpuDemand& demand) {
  std::string text = std::to_string(demand.gpus) + " " + demand.gpu_type;
  if (!demand.zone.empty()) text += " in zone " + demand.zone;
  if (demand.gpus_per_group > 1)
    text += " (groups of " + std::to_string(demand.gpus_per_group) + " within one node)";
  return text;
}

// Places one demand; returns the groups still unplaced (0 on success).
int place_demand(const GpuDemand& demand, std::size_t demand_index, std::vector<FreeNode>& nodes,
                 std::vector<NodeAllocation>& allocations) {
  const int group = demand.gpus_per_group;
  int groups_left = demand.gpus / group;
  while (groups_left > 0) {
    FreeNode* best_fit = nullptr;  // fewest free groups among nodes that hold all that is left
    FreeNode* largest = nullptr;   // most free groups
    for (FreeNode& node : nodes) {
      if (!matches(node, demand)) continue;
      const int groups = node.free_gpus / group;
      if (groups <= 0) continue;
      if (groups >= groups_left) {
        if (best_fit == nullptr || node.free_gpus < best_fit->free_gpus ||
            (node.free_gpus == best_fit->free_gpus && node.name < best_fit->name))
          best_fit = &node;
      }
      if (largest == nullptr || node.free_gpus > largest->free_gpus ||
          (node.free_gpus == largest->free_gpus && node.name < largest->name))
        largest = &node;
    }
    FreeNode* chosen = best_fit != nullptr ? best_fit : largest;
    if (chosen == nullptr) break;
    const int take_groups = std::min(groups_left, chosen->free_gpus / group);
    chosen->free_gpus -= take_groups * group;
    groups_left -= take_groups;
    allocations.push_back({demand_index, chosen->name, take_groups * group});
  }
  return groups_left;
}

}  // namespace

bool place_request(const PlacementRequest& request, std::vector<FreeNode>& nodes,
                   std::vector<NodeAllocation>& allocations, std::string& why) {
  // Hardest first: big indivisible groups fragment worst, then big demands.
  std::vector<std::size_t> order(request.demands.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const GpuDemand& da = request.demands[a];
    const GpuDemand& db = request.demands[b];
    if (da.gpus_per_group != db.gpus_per_group) return da.gpus_per_group > db.gpus_per_group;
    return da.gpus > db.gpus;
  });
  for (std::size_t index : order) {
    const GpuDemand& demand = request.demands[index];
    if (demand.gpus < 0 || demand.gpus_per_group <= 0 || demand.gpus % demand.gpus_per_group != 0) {
      why = "invalid demand: " + describe(demand);
      return false;
    }
    const int groups_left = place_demand(demand, index, nodes, allocations);
    if (groups_left > 0) {
      int free_matching = 0;
      for (const FreeNode& node : nodes) {
        if (matches(node, demand)) free_matching += node.free_gpus;
      }
      why = "needs " + describe(demand) + "; " +
            std::to_string(groups_left * demand.gpus_per_group) + " could not be placed (" +
            std::to_string(free_matching) + " matching GPUs left free)";
      return false;
    }
  }
  return true;
}

PackResult pack_first_feasible(const std::vector<PlacementRequest>& ranked,
                               const std::vector<FreeNode>& nodes) {
  PackResult result;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    std::vector<FreeNode> scratch = nodes;
    std::vector<NodeAllocation> allocations;
    std::string why;
    if (place_request(ranked[i], scratch, allocations, why)) {
      result.placed = true;
      result.request_index = i;
      result.allocations = std::move(allocations);
      return result;
    }
    result.rejections.push_back("plan " + std::to_string(i) + ": " + why);
  }
  return result;
}

std::map<std::string, int> gpus_by_node(const std::vector<NodeAllocation>& allocations) {
  std::map<std::string, int> by_node;
  for (const NodeAllocation& allocation : allocations) by_node[allocation.node] += allocation.gpus;
  return by_node;
}

}  // namespace flotilla::planner
