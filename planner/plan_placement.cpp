#include "planner/plan_placement.h"

#include <map>
#include <tuple>

namespace flotilla::planner {

PlacementRequest placement_request(const Plan& plan) {
  std::map<std::tuple<std::string, std::string, int>, int> gpus;
  for (const Stage& stage : plan.stages) {
    for (int r = 0; r < stage.dp(); ++r) {
      const Replica& replica = stage.replicas[static_cast<std::size_t>(r)];
      gpus[{replica.gpu_type, replica.zone, stage.replica_tp(r)}] += stage.replica_tp(r);
    }
  }
  PlacementRequest request;
  for (const auto& [key, count] : gpus) {
    const auto& [type, zone, tp] = key;
    request.demands.push_back({type, zone, count, tp});
  }
  return request;
}

}  // namespace flotilla::planner
