#include "trainer-sidecar/worker_args.h"

#include <algorithm>

#include "common/significant_digits.h"
#include "launch/megatron.h"

namespace flotilla::sidecar {

std::vector<std::string> worker_rank_args(const PodPlan& p, const RankLaunch& launch) {
  std::vector<std::string> a = {"rank",
                                "--model", p.model,
                                "--world-size", std::to_string(p.world_size),
                                "--pp", std::to_string(p.pp),
                                "--dp", std::to_string(p.dp),
                                "--global-batch", std::to_string(p.global_batch_size),
                                "--micro-batch", std::to_string(p.micro_batch_size),
                                "--virtual-shards", std::to_string(p.virtual_shards),
                                "--seed", std::to_string(p.seed),
                                "--steps", std::to_string(p.train_steps),
                                "--data", p.data_path,
                                "--checkpoint-dir", p.checkpoint_dir,
                                "--checkpoint-every", std::to_string(p.checkpoint_every_steps)};
  if (!p.partition.empty()) a.insert(a.end(), {"--partition", p.partition});
  if (!p.loss_log.empty()) a.insert(a.end(), {"--loss-log", p.loss_log});
  if (!launch.progress_path.empty()) a.insert(a.end(), {"--progress", launch.progress_path});
  if (launch.connect_timeout_s > 0)
    a.insert(a.end(), {"--connect-timeout", significant_digits_text(launch.connect_timeout_s, 6)});
  return a;
}

std::map<std::string, std::string> rank_env(const PodPlan& plan, int local_index,
                                            const std::string& master_addr, int master_port) {
  return {{"RANK", std::to_string(plan.ranks.at(static_cast<std::size_t>(local_index)))},
          {"LOCAL_RANK", std::to_string(local_index)},
          {"WORLD_SIZE", std::to_string(plan.world_size)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", std::to_string(master_port)}};
}

std::vector<std::string> megatron_pod_argv(const PodPlan& plan, const std::string& master_addr, int master_port) {
  const int local = static_cast<int>(plan.ranks.size());
  launch::TorchrunPod pod{plan.world_size / local, plan.ranks.front() / local, local, master_addr, master_port};
  return launch::torchrun_argv(pod, plan.megatron_args);
}

std::map<std::string, std::string> megatron_pod_env(const PodPlan& plan) {
  std::map<std::string, std::string> env;
  for (const launch::EnvVar& e : launch::megatron_env(plan.tp)) env[e.name] = e.value;
  return env;
}

int megatron_seq_length(const PodPlan& plan) {
  const auto& a = plan.megatron_args;
  const auto it = std::find(a.begin(), a.end(), "--seq-length");
  if (it == a.end() || it + 1 == a.end()) return 0;
  try {
    return std::stoi(*(it + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace flotilla::sidecar
