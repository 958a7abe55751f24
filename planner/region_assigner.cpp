#include "planner/region_assigner.h"

#include <algorithm>
#include <map>
#include <string>

namespace flotilla::planner {

RegionAssigner::RegionAssigner(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs, int dp)
    : configs_(configs), dp_(dp) {
  // Every region name gets one number, so that a stage can take a neighbour's region (same name,
  // perhaps another pool) by comparing numbers.
  std::map<std::string, int> number;
  const auto id_of = [&](const std::string& name) {
    return number.try_emplace(name, static_cast<int>(number.size())).first->second;
  };
  for (const SearchPool& pool : pools) {
    region_base_.push_back(static_cast<int>(region_ids_.size()));
    if (pool.regions.empty()) {
      region_ids_.push_back(id_of(pool.region));
      initial_units_.push_back(0);  // one region: the DP's capacity already holds
      first_zone_.push_back(0);
      continue;
    }
    for (std::size_t r = 0; r < pool.regions.size(); ++r) {
      region_ids_.push_back(id_of(pool.regions[r]));
      initial_units_.push_back(r < pool.region_gpus.size() ? pool.region_gpus[r] / dp : 0);
      std::size_t first = 0;
      for (std::size_t z = 0; z < pool.zone_region.size(); ++z) {
        if (pool.zone_region[z] != static_cast<int>(r)) continue;
        first = z;
        break;
      }
      first_zone_.push_back(static_cast<int>(first));
    }
  }
  units_left_.resize(initial_units_.size());
  for (const StageConfig& config : configs) {
    const SearchPool& pool = pools[static_cast<std::size_t>(config.pool)];
    views_.push_back({config.tp, static_cast<int>(pool.region_gpus.size()), region_base_[config.pool]});
  }
}

bool RegionAssigner::serves(const std::vector<StageConfig>& configs, int dp) const {
  if (dp != dp_ || configs.size() != configs_.size()) return false;
  for (std::size_t c = 0; c < configs.size(); ++c)
    if (configs[c].pool != configs_[c].pool || configs[c].tp != configs_[c].tp) return false;
  return true;
}

// The first of a stage's regions with room for its TP whose name has number `wanted` (any name
// when wanted < 0), or -1.
int RegionAssigner::region_with_room(const ConfigView& view, int wanted) const {
  const int* left = units_left_.data() + view.region_base;
  const int* ids = region_ids_.data() + view.region_base;
  for (int r = 0; r < view.regions; ++r)
    if (left[r] >= view.tp && (wanted < 0 || ids[r] == wanted)) return r;
  return -1;
}

// One try: stages in order_; each takes a placed pipeline neighbour's region if that has room,
// else the first region with room.
bool RegionAssigner::attempt(const std::vector<StageChoice>& choices, bool beside_first, std::vector<int>& region) {
  std::copy(initial_units_.begin(), initial_units_.end(), units_left_.begin());
  region.assign(choices.size(), -1);
  const std::size_t last = choices.size() - 1;
  for (std::size_t i : order_) {
    const ConfigView& view = views_[static_cast<std::size_t>(choices[i].config)];
    if (view.regions == 0) {  // one region: the DP's capacity already holds
      region[i] = 0;
      continue;
    }
    int chosen = -1;
    // i - 1 wraps past the end when i == 0; kLastBesideFirst: the last stage looks at stage 0 first.
    for (std::size_t n : {beside_first && i == last ? std::size_t{0} : i - 1, i - 1, i + 1}) {
      if (n >= choices.size() || region[n] < 0 || chosen >= 0) continue;
      chosen =
          region_with_room(view, region_ids_[static_cast<std::size_t>(
                                     views_[static_cast<std::size_t>(choices[n].config)].region_base + region[n])]);
    }
    if (chosen < 0) chosen = region_with_room(view, -1);
    if (chosen < 0) return false;
    units_left_[static_cast<std::size_t>(view.region_base + chosen)] -= view.tp;
    region[i] = chosen;
  }
  return true;
}

// attempt() in pipeline order, the proxy's case and most candidates' only try: the one
// neighbour placed before a stage is the previous stage, so it looks only there (attempt() also
// visits i - 1 twice and i + 1, which is never placed yet in this order).
bool RegionAssigner::attempt_in_pipeline_order(const std::vector<StageChoice>& choices, std::vector<int>& region) {
  std::copy(initial_units_.begin(), initial_units_.end(), units_left_.begin());
  region.resize(choices.size());
  int previous_id = -1;  // the number of the previous stage's region name
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const ConfigView& view = views_[static_cast<std::size_t>(choices[i].config)];
    const int* ids = region_ids_.data() + view.region_base;
    if (view.regions == 0) {  // one region: the DP's capacity already holds
      region[i] = 0;
      previous_id = ids[0];
      continue;
    }
    int chosen = previous_id >= 0 ? region_with_room(view, previous_id) : -1;
    if (chosen < 0) chosen = region_with_room(view, -1);
    if (chosen < 0) return false;
    units_left_[static_cast<std::size_t>(view.region_base + chosen)] -= view.tp;
    region[i] = chosen;
    previous_id = ids[chosen];
  }
  return true;
}

bool RegionAssigner::assign(const std::vector<StageChoice>& choices, Placement placement, std::vector<int>& region) {
  const bool beside_first = placement == Placement::kLastBesideFirst && choices.size() > 1;
  if (!beside_first && attempt_in_pipeline_order(choices, region)) return true;
  order_.resize(choices.size());
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  if (beside_first && order_.size() > 2) std::rotate(order_.begin() + 1, order_.end() - 1, order_.end());
  if (beside_first && attempt(choices, beside_first, region)) return true;
  // Largest TP first: with power-of-two TP degrees this fits whenever regions_hold() does.
  std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
    return views_[static_cast<std::size_t>(choices[a].config)].tp >
           views_[static_cast<std::size_t>(choices[b].config)].tp;
  });
  if (attempt(choices, beside_first, region)) return true;
  region.clear();
  return false;
}

void RegionAssigner::first_zones(const std::vector<StageChoice>& choices, std::vector<std::size_t>& first) {
  first.assign(choices.size(), 0);
  bool grouped = false;  // the common case, one region per pool, needs no assignment
  for (const StageChoice& choice : choices)
    grouped = grouped || views_[static_cast<std::size_t>(choice.config)].regions > 0;
  if (!grouped || !assign(choices, Placement::kPipelineOrder, region_)) return;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const ConfigView& view = views_[static_cast<std::size_t>(choices[i].config)];
    if (view.regions > 0)
      first[i] = static_cast<std::size_t>(first_zone_[static_cast<std::size_t>(view.region_base + region_[i])]);
  }
}

}  // namespace flotilla::planner
