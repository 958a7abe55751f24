// `flotilla plan`: minimal dispatcher so that `flotilla plan evaluate` works; helper B owns this
// file and replaces it with the plan-search table command (keeping the `evaluate` dispatch).
#include <cstdio>

#include "cli/command.h"
#include "cli/plan_evaluate.h"

namespace {
const flotilla::cli::CommandRegistrar plan_command{{
    "plan", "plan resources and parallelism for a model (`plan evaluate` scores one given plan)",
    [](const std::vector<std::string>& args) {
      if (!args.empty() && args[0] == "evaluate") {
        return run_plan_evaluate(std::vector<std::string>(args.begin() + 1, args.end()));
      }
      std::fprintf(stderr, "flotilla plan: only `flotilla plan evaluate ...` is available in this build\n");
      return 2;
    }}};
}  // namespace
