// `flotilla plan evaluate`: evaluate one given plan (Sailor's plan_config_*.json format).
//
// Guarantees (stable contract): with --json prints one JSON object with at least
//   {"peak_bytes_max": N, "iter_seconds": X, "feasible": bool, "ranks": [...], "stages": [...]}
//   and exits 0 when the plan fits, 1 when it does not (OOM, the reason in "infeasible"), 2 on bad
//   input with one line on stderr saying what is wrong.
// Assumes: args exclude the words "plan evaluate". B's cli/cmd_plan.cpp dispatches to this.
#pragma once

#include <string>
#include <vector>

int run_plan_evaluate(const std::vector<std::string>& args);
