#include "planner/plan.h"

namespace flotilla::planner {

int Plan::num_micro_batches() const {
  const int per_step = micro_batch_size * dp();
  if (per_step <= 0) return 0;
  return (global_batch_size + per_step - 1) / per_step;
}

int Plan::num_gpus() const {
  int n = 0;
  for (const Stage& s : stages) n += s.num_gpus();
  return n;
}

std::string validate_plan(const Plan& plan, int num_blocks) {
  if (plan.stages.empty()) return "plan has no stages";
  if (plan.micro_batch_size <= 0) return "micro_batch_size must be positive";
  if (plan.global_batch_size <= 0) return "global_batch_size must be positive";
  if (plan.options.zero_stage < 0 || plan.options.zero_stage > 3) return "zero_stage must be 0..3";
  int expect = 0;
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    const std::string id = "stage " + std::to_string(i);
    if (s.first_block != expect) {
      // Blocks are named inclusively here, as a Sailor plan's layers_per_stage lists them.
      return id + " starts at block " + std::to_string(s.first_block) + " but must start at block " +
             std::to_string(expect) +
             (expect == 0 ? std::string(" (the embedding)")
                          : ", right after the previous stage's last block " + std::to_string(expect - 1)) +
             ": every block in exactly one stage, in order";
    }
    if (s.last_block <= s.first_block) return id + " has no blocks";
    if (s.tp <= 0) return id + " has a non-positive TP degree";
    if (s.replicas.empty()) return id + " has no DP replicas";
    if (s.dp() != plan.stages.front().dp()) {
      return id + " has " + std::to_string(s.dp()) + " DP replicas but stage 0 has " +
             std::to_string(plan.stages.front().dp()) + "; every stage needs the same DP degree";
    }
    for (const Replica& r : s.replicas) {
      if (r.gpu_type.empty()) return id + " has a replica without a GPU type";
      if (r.gpus_per_node < 0) return id + " has a replica with negative gpus_per_node";
      if (r.tp < 0) return id + " has a replica with a negative TP degree";
    }
    expect = s.last_block;
  }
  if (expect != num_blocks) {
    return "stages cover blocks 0.." + std::to_string(expect - 1) + " but the model has " +
           std::to_string(num_blocks) + " blocks, 0.." + std::to_string(num_blocks - 1) +
           " (embedding + layers + head)";
  }
  return {};
}

}  // namespace flotilla::planner
