// Best-fit placement of a ranked list of plans onto nodes (Frenzy's HAS, Algorithm 1).
//
// Guarantees: pack_first_feasible() walks the ranked requests in order and places the first one
//   that fits; it never places a GPU of the wrong type or zone, never takes more GPUs from a
//   node than it has free, and never splits a group (a tensor-parallel replica, H1) across
//   nodes. Within one demand it uses a single node when one can hold everything (the one with
//   the fewest free GPUs that suffices: best fit), else takes the node with the most free GPUs
//   and repeats for the rest (greedy from the largest). Ties break by node name, so the result
//   is deterministic. When nothing fits it says, per request, which demand could not be met.
// Assumes: node names are unique; counts are non-negative.
// Caveats: HAS checks feasibility by counting free GPUs (Alg. 1 line 5); we check it by
//   actually packing, which is the same for groups of 1 and stricter for larger groups. Demands
//   of one request are placed one after another (largest group first), so a demand placed early
//   can take a node a later demand would have fitted better; HAS has the same greedy shape.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace flotilla::planner {

// Free capacity of one node right now.
struct FreeNode {
  std::string name;
  std::string gpu_type;
  std::string zone;
  int free_gpus = 0;
};

// `gpus` GPUs of one type (and zone, unless zone is empty) placed in whole groups of
// `gpus_per_group`, each group inside one node.
struct GpuDemand {
  std::string gpu_type;
  std::string zone;  // empty: any zone
  int gpus = 0;
  int gpus_per_group = 1;
};

// Everything one plan needs.
struct PlacementRequest {
  std::vector<GpuDemand> demands;
};

struct NodeAllocation {
  std::size_t demand_index = 0;  // into PlacementRequest::demands
  std::string node;
  int gpus = 0;
};

struct PackResult {
  bool placed = false;
  std::size_t request_index = 0;           // which ranked request was placed (when placed)
  std::vector<NodeAllocation> allocations;  // in allocation order
  std::vector<std::string> rejections;      // one line per request that did not fit, in order
};

// Places one request on `nodes`, consuming their free GPUs. Returns false (and leaves `nodes`
// partly consumed) when it does not fit; `why` then names the demand that failed.
bool place_request(const PlacementRequest& request, std::vector<FreeNode>& nodes,
                   std::vector<NodeAllocation>& allocations, std::string& why);

// HAS: the first request in `ranked` that fits on `nodes`, best-fit placed.
PackResult pack_first_feasible(const std::vector<PlacementRequest>& ranked,
                               const std::vector<FreeNode>& nodes);

// node name → GPUs taken, summed over demands.
std::map<std::string, int> gpus_by_node(const std::vector<NodeAllocation>& allocations);

}  // namespace flotilla::planner
