// A planner job backed by Sailor's measured data (shell I/O): a planner preset on one GPU type
// with the profiles (<profiles_dir>/<model>/<gpu>/profile.json) and network fits loaded from
// disk, for the availability replay's table (availability_table.h).
//
// Guarantees: never throws; one error line naming the unknown model, or the directory that could
//   not be read. `profiled` says whether a measured profile exists for (model, GPU), found as
//   the planner finds it (the catalog type's name or any alias: GH200-96 uses Sailor's GH-96
//   folder, "a100" the A100-40 one); without one the planner falls back to its FLOP estimate,
//   which callers should report.
// Assumes: the caller resolves the directories (common/data_path.h), so this stays free of the
//   environment.
#pragma once

#include <string>

#include "scaler/planner_predictor.h"

namespace flotilla::simulator {

struct SailorJobLoad {
  scaler::PlannerJob job;
  bool profiled = false;
  std::string error;
};

SailorJobLoad load_sailor_planner_job(const std::string& model, const std::string& gpu,
                                      int global_batch, const std::string& profiles_dir,
                                      const std::string& network_dir);

}  // namespace flotilla::simulator
