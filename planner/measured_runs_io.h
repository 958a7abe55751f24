// Measured runs as (plan, measured memory and time) per group: Sailor's runs as files.
//
// Guarantees: read_sailor_plan_group() reads every plan_config_*.json under a folder (sorted);
//   a plan parse_sailor_plan() refuses is kept with its one-line reason (refused, not judged).
//   read_megatron_runs() reads Sailor's megatron-runs folder (Aceso op-level Megatron, OPT-350,
//   GH200, TP 4): per run the plan, per stage its exact op split as StageShape, the worst rank's
//   max_allocated / max_reserved (MiB in the CSVs) and the slowest rank's iteration time.
// Assumes: the folder layouts of ../shared/data/sailor. Used by bench/planner_accuracy and
//   tests/planner/validation_test.cpp. File I/O, like the other *_io files: not the pure core.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "planner/memory_model.h"
#include "planner/model_spec.h"
#include "planner/plan.h"

namespace flotilla::planner {

struct SailorRun {
  std::string name;          // relative path, e.g. N4/plan_config_N4_D4.json
  std::optional<Plan> plan;  // empty when refused
  std::string refused_because;
  double measured_max_mem_bytes = 0;
  double measured_iter_seconds = 0;
};
std::vector<SailorRun> read_sailor_plan_group(const std::filesystem::path& dir, const ModelSpec& model);

struct MegatronStage {
  StageShape shape;
  double max_allocated_bytes = 0;
  double max_reserved_bytes = 0;
};
struct MegatronRun {
  std::string name;
  Plan plan;  // layer-granular (a split layer goes to the stage holding its score ops)
  std::vector<MegatronStage> stages;
  double measured_iter_seconds = 0;  // 0 when the time CSVs are absent
};
std::vector<MegatronRun> read_megatron_runs(const std::filesystem::path& root, const ModelSpec& model);

}  // namespace flotilla::planner
