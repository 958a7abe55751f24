// Sailor's plan_config_*.json <-> Plan (pure: takes and returns text/structs).
//
// Guarantees: parse_sailor_plan() maps pipeline_list[0] (layers_per_stage as block lists,
//   tmp_per_stage as per-stage DP replicas [[[gpu, gpus_in_node, zone], ...], tp], mbs, gbs)
//   to a Plan; it also returns the measurements (real, max_mem, red_grads) when present.
//   One clear line on anything malformed or negative.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "planner/plan.h"
#include "planner/result.h"

namespace flotilla::planner {

struct SailorPlanFile {
  Plan plan;
  std::optional<double> measured_iter_seconds;    // "real"
  std::optional<double> measured_sync_seconds;    // "red_grads"
  std::optional<std::int64_t> measured_max_mem_bytes;  // "max_mem"
};

Result<SailorPlanFile> parse_sailor_plan(std::string_view json_text, int num_blocks);

}  // namespace flotilla::planner
