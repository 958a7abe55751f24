// The reference worker's command line for one rank of a pod's plan: what the sidecar execs.
//
// Guarantees: worker_rank_args() renders every job flag the worker needs from the PodPlan
//   alone (model, world/pp/dp/partition, batch geometry, seed, steps = trainSteps, data,
//   checkpoint dir and interval, the loss log, the progress file, the connect timeout), in a
//   fixed order, starting with the subcommand "rank"; the worker parses it back to the same job
//   (tests/trainer-sidecar/worker_args_test.cpp). rank_env() is the torchrun-style environment
//   of local rank `local_index` (RANK = plan.ranks[local_index]).
// Assumes: the plan parsed (common/pod_plan.h), so its counts are valid; worker_kind flotilla.
// Caveats: pure (no I/O). The loss log is passed to every rank; only global rank 0 writes it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/pod_plan.h"

namespace flotilla::sidecar {

struct RankLaunch {
  std::string progress_path;      // file every local rank appends its progress lines to
  double connect_timeout_s = 0;   // the worker's --connect-timeout (0: the worker's default)
};

std::vector<std::string> worker_rank_args(const PodPlan& plan, const RankLaunch& launch);

std::map<std::string, std::string> rank_env(const PodPlan& plan, int local_index,
                                            const std::string& master_addr, int master_port);

}  // namespace flotilla::sidecar
