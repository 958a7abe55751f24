// The reference worker's command line for one rank of a pod's plan: what the sidecar execs.
//
// Guarantees: worker_rank_args() renders every job flag the worker needs from the PodPlan
//   alone (model, world/pp/dp/partition, batch geometry, seed, steps = trainSteps, data,
//   checkpoint dir and interval, the loss log, the progress file, the connect timeout), in a
//   fixed order, starting with the subcommand "rank"; the worker parses it back to the same job
//   (tests/trainer-sidecar/worker_args_test.cpp). rank_env() is the torchrun-style environment
//   of local rank `local_index` (RANK = plan.ranks[local_index]).
//   Worker kind megatron: megatron_pod_argv() is the pod's one torchrun agent
//   (launch::torchrun_argv(): node rank ranks[0] / |ranks|, nnodes worldSize / |ranks|,
//   --nproc-per-node |ranks|, the epoch's rendezvous address and port) followed by
//   plan.megatron_args (the script and its flags); megatron_pod_env() is
//   launch::megatron_env(tp).
// Assumes: the plan parsed (common/pod_plan.h), so its counts are valid (and, for megatron,
//   its ranks consecutive).
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

std::vector<std::string> megatron_pod_argv(const PodPlan& plan, const std::string& master_addr, int master_port);
std::map<std::string, std::string> megatron_pod_env(const PodPlan& plan);
// The value of --seq-length in plan.megatron_args (0 when absent): tokens/s from the log line.
int megatron_seq_length(const PodPlan& plan);

}  // namespace flotilla::sidecar
