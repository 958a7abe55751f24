#include "scaler/scaling_policy.h"

#include <algorithm>
#include <numeric>

#include "common/significant_digits.h"

namespace flotilla::scaler {

std::vector<int> scale_up_order(const std::vector<ElasticJobView>& jobs) {
  std::vector<int> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (jobs[a].current_gpus != jobs[b].current_gpus)
      return jobs[a].current_gpus < jobs[b].current_gpus;
    return jobs[a].job_id < jobs[b].job_id;
  });
  return order;
}

std::optional<ScaleUpChoice> choose_scale_up(const ElasticJobView& job, int free_gpus,
                                             double arrival_rate_per_s, bool use_benefit_check,
                                             const BenefitCheckParams& params) {
  if (!job.table || free_gpus <= 0) return std::nullopt;
  const double current = job.table->speedup_at(job.current_gpus);
  if (!(current > 0)) return std::nullopt;
  const int limit = std::min(job.table->cap_gpus, job.current_gpus + free_gpus);
  const ScaleEntry* best = job.table->best_within(limit, job.current_gpus + 1);
  if (!best || !(best->speedup > current)) return std::nullopt;
  ScaleUpChoice choice;
  choice.target_gpus = best->gpus;
  choice.speedup = best->speedup / current;
  choice.decision = check_benefit(arrival_rate_per_s, choice.speedup, job.overhead_s, params);
  choice.scale = use_benefit_check ? choice.decision.scale_up : true;
  if (use_benefit_check && choice.scale && job.remaining_s && *job.remaining_s <= choice.decision.required_idle_s) {
    choice.scale = false;
    choice.ends_before_restart_repays = true;
  }
  return choice;
}

std::string ends_before_restart_repays_explain(const ScaleUpChoice& choice) {
  return "the job ends before the restart repays itself (it needs more than " +
         significant_digits_text(choice.decision.required_idle_s, 3) +
         " s of training left; the Poisson check alone: " + choice.decision.explain() + ")";
}

PreemptionPlan plan_preemption(int gpus_needed, int gpus_free,
                               const std::vector<ElasticJobView>& jobs) {
  PreemptionPlan plan;
  if (gpus_free >= gpus_needed) {
    plan.feasible = true;
    return plan;
  }
  struct Victim {
    const ElasticJobView* job;
    double gain;
  };
  std::vector<Victim> victims;
  int reclaimable = 0;
  for (const auto& j : jobs) {
    if (!j.table) continue;
    const int initial = j.table->initial.gpus();
    if (j.current_gpus <= initial) continue;
    victims.push_back({&j, j.table->speedup_at(j.current_gpus)});
    reclaimable += j.current_gpus - initial;
  }
  if (gpus_free + reclaimable < gpus_needed) {
    plan.reason = "reclaim insufficient: need " + std::to_string(gpus_needed) + ", free " +
                  std::to_string(gpus_free) + ", reclaimable " + std::to_string(reclaimable);
    return plan;
  }
  std::stable_sort(victims.begin(), victims.end(), [](const Victim& a, const Victim& b) {
    if (a.gain != b.gain) return a.gain > b.gain;
    return a.job->job_id < b.job->job_id;
  });
  int still = gpus_needed - gpus_free;
  for (const auto& v : victims) {
    if (still <= 0) break;
    const ScaleTable& t = *v.job->table;
    const int initial = t.initial.gpus();
    // The best layout that leaves at least `still` GPUs free, never below the initial count.
    const ScaleEntry* target = t.best_within(v.job->current_gpus - still, initial);
    const int to = target ? target->gpus : initial;
    plan.shrinks.push_back({v.job->job_id, v.job->current_gpus, to});
    plan.reclaimed_gpus += v.job->current_gpus - to;
    still -= v.job->current_gpus - to;
  }
  plan.feasible = still <= 0;
  if (!plan.feasible) {
    plan.reason = "reclaim insufficient after shrinking to table entries";
    plan.shrinks.clear();
    plan.reclaimed_gpus = 0;
  }
  return plan;
}

std::optional<ScaleEntry> shrink_after_node_loss(const ScaleTable& table, int gpus_left) {
  const ScaleEntry* e = table.best_within(gpus_left);
  if (!e) return std::nullopt;
  return *e;
}

}  // namespace flotilla::scaler
