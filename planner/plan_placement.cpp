#include "planner/plan_placement.h"

#include <map>
#include <tuple>

namespace flotilla::planner {

PlacementRequest placement_request(const Plan& plan) {
  std::map<std::tuple<std::string, std::string, int>, int> gpus;
  for (const Stage& stage : plan.stages) {
    for (const Replica& replica : stage.replicas)
      gpus[{replica.gpu_type, replica.zone, stage.tp}] += stage.tp;
  }
  PlacementRequest request;
  for (const auto& [key, count] : gpus) {
    const auto& [type, zone, tp] = key;
    request.demands.push_back({type, zone, count, tp});
  }
  return request;
}

}  // namespace flotilla::planner
