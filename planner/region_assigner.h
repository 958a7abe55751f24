// assign_regions() and stage_first_zones() (search_space.h) for many splits over the same pools,
// configs and D: the rule, stated once, that puts each stage's D replicas in one region.
//
// Guarantees: assign() gives exactly assign_regions()'s answer and first_zones() exactly
//   stage_first_zones()'s (those two call it); neither allocates once its buffers have grown to
//   the longest pipeline seen, and regions are compared by a number given to each region name
//   once, not by the names.
// Assumes: the pools and configs outlive the assigner and do not change (it reads their sizes,
//   regions and zones when built); choices name configs of that list.
// Caveats: the proxy (search_proxy.h) scores every DP candidate of a 14,336-GPU search through
//   it (~190 k pipelines of up to 35 stages for GPT-3-175B), which is why it keeps its buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "planner/search_space.h"

namespace flotilla::planner {

class RegionAssigner {
 public:
  RegionAssigner(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs, int dp);

  // Whether it was built for these configs (by value) and D.
  bool serves(const std::vector<StageConfig>& configs, int dp) const;

  // Per stage, its region (an index into its pool's regions; 0 for a one-region pool) into
  // `region`; false (and `region` empty) when no assignment fits.
  bool assign(const std::vector<StageChoice>& choices, Placement placement, std::vector<int>& region);

  // Per stage, the index into its pool's zones of its region's first zone (0 for one-region
  // pools, and for all when no assignment fits), into `first`.
  void first_zones(const std::vector<StageChoice>& choices, std::vector<std::size_t>& first);

 private:
  bool attempt(const std::vector<StageChoice>& choices, bool beside_first, std::vector<int>& region);
  bool attempt_in_pipeline_order(const std::vector<StageChoice>& choices, std::vector<int>& region);

  std::vector<StageConfig> configs_;
  int dp_ = 1;
  // Per config: its TP, its pool's regions (0: one region) and where they start in the flat
  // per-(pool, region) arrays below.
  struct ConfigView {
    int tp = 1;
    int regions = 0;
    int region_base = 0;
  };
  int region_with_room(const ConfigView& view, int wanted) const;
  std::vector<ConfigView> views_;
  std::vector<int> region_ids_;     // per (pool, region), flat; one-region pools: one entry, its region
  std::vector<int> region_base_;    // per pool: its first entry in region_ids_
  std::vector<int> initial_units_;  // per (pool, region), flat: GPUs / D (one-region pools: unused)
  std::vector<int> units_left_;     // attempt()'s units left, flat
  std::vector<int> first_zone_;     // per (pool, region), flat as region_ids_: first zone index
  std::vector<std::size_t> order_;  // attempt()'s stage order
  std::vector<int> region_;         // first_zones()'s assignment
};

}  // namespace flotilla::planner
