// What a plan asks of the packer: GPUs per (type, zone) in whole tensor-parallel groups.
//
// Guarantees: placement_request() sums a plan's replicas into one demand per (GPU type, zone,
//   TP degree), with gpus_per_group = TP so that the packer keeps every TP group in one node
//   (H1). Demands come out in a fixed order (type, zone, TP), so packing is deterministic.
#pragma once

#include <vector>

#include "planner/packer.h"
#include "planner/plan.h"

namespace flotilla::planner {

PlacementRequest placement_request(const Plan& plan);

}  // namespace flotilla::planner
