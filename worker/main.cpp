// flotilla-worker: the reference Megatron-style trainer.
//   flotilla-worker run ...       spawn the ranks of a job locally and wait for them
//   flotilla-worker relaunch ...  stop the running job at a checkpoint, restart with a new layout
//   flotilla-worker rank ...      one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from env)
#include <cstdio>
#include <string>
#include <vector>

#include "worker/runtime/job_options.h"
#include "worker/runtime/launcher.h"

int main(int argc, char** argv) {
  using namespace flotilla::worker;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::printf("usage: %s\n", job_usage().c_str());
    return args.empty() ? 2 : 0;
  }
  std::string mode = args[0];
  args.erase(args.begin());
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::printf("usage: %s\n", job_usage().c_str());
    return 0;
  }
  if (mode == "run" || mode == "relaunch") return launcher_main(mode, args);
  if (mode == "rank") return rank_main(args);
  std::fprintf(stderr, "flotilla-worker: error: unknown command '%s'; usage: %s\n", mode.c_str(),
               job_usage().c_str());
  return 2;
}
