#include "scaler/decide.h"

#include "scaler/scaling_policy.h"

namespace flotilla::scaler {

const char* to_string(ScaleAction a) {
  switch (a) {
    case ScaleAction::keep: return "keep";
    case ScaleAction::scale_up: return "scale-up";
    case ScaleAction::shrink: return "shrink";
    case ScaleAction::requeue: return "requeue";
  }
  return "?";
}

Decision decide(const ScaleTable& table, const JobSnapshot& job, const DecideParams& params) {
  Decision d;
  d.target_gpus = job.current_gpus;
  const int alive = job.gpus_alive < 0 ? job.current_gpus : job.gpus_alive;
  if (alive < job.current_gpus) {
    const auto entry = shrink_after_node_loss(table, alive);
    if (!entry) {
      d.action = ScaleAction::requeue;
      d.target_gpus = 0;
      d.reason = "lost GPUs: no feasible layout on " + std::to_string(alive) +
                 " GPUs; requeue at the initial size";
      return d;
    }
    d.action = ScaleAction::shrink;
    d.target = *entry;
    d.target_gpus = entry->gpus;
    d.overhead_s = estimate_restart_overhead(job.checkpoint_bytes, job.current_gpus, entry->gpus,
                                             job.measured_restart_s, params.overhead)
                       .total_s();
    d.reason = "lost GPUs: shrink " + std::to_string(job.current_gpus) + " -> " +
               std::to_string(entry->gpus) + " (" + entry->config.to_string() + ")";
    return d;
  }
  if (!job.queue_empty) {
    d.reason = "keep: jobs are waiting for GPUs";
    return d;
  }
  ElasticJobView view{0, job.current_gpus, &table, 0.0, job.remaining_s};
  const auto target = choose_scale_up(view, job.free_gpus, job.arrival_rate_per_s, false);
  if (!target) {
    d.reason = "keep: no layout within " + std::to_string(job.free_gpus) +
               " free GPUs and the cap is faster";
    return d;
  }
  view.overhead_s = estimate_restart_overhead(job.checkpoint_bytes, job.current_gpus,
                                              target->target_gpus, job.measured_restart_s,
                                              params.overhead)
                        .total_s();
  const auto choice = choose_scale_up(view, job.free_gpus, job.arrival_rate_per_s,
                                      params.use_benefit_check, params.benefit);
  d.benefit = choice->decision;
  d.overhead_s = view.overhead_s;
  if (choice->ends_before_restart_repays) {
    d.ends_before_restart_repays = true;
    d.reason = "keep: scale-up to " + std::to_string(choice->target_gpus) +
               " refused: " + ends_before_restart_repays_explain(*choice);
    return d;
  }
  if (!choice->scale) {
    d.reason = choice->decision.explain();
    return d;
  }
  d.action = ScaleAction::scale_up;
  d.target = *table.find(choice->target_gpus);
  d.target_gpus = choice->target_gpus;
  d.reason = choice->decision.explain() + " -> " + std::to_string(choice->target_gpus) + " GPUs (" +
             d.target->config.to_string() + ")";
  return d;
}

}  // namespace flotilla::scaler
