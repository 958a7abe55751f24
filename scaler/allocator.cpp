#include "scaler/allocator.h"

#include <algorithm>
#include <cmath>

#include "scaler/scaling_policy.h"

namespace flotilla::scaler {
namespace {

// Free GPUs by type, taken by jobs that may use a subset of the types, minus the ones a job must
// not be given (AllocatorJob::unusable_free_gpus_by_type).
class FreePool {
 public:
  explicit FreePool(std::map<std::string, int> free) : free_(std::move(free)) {}

  int available(const AllocatorJob& job) const {
    int n = 0;
    for (const auto& [type, count] : free_)
      if (allowed(job.gpu_types, type)) n += usable(job, type, count);
    return n;
  }

  // Takes n GPUs from the allowed types with the most usable free first (ties: by name).
  void take(const AllocatorJob& job, int n) {
    while (n > 0) {
      auto best = free_.end();
      int best_usable = 0;
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (const int u = usable(job, it->first, it->second); allowed(job.gpu_types, it->first) && u > best_usable) {
          best = it;
          best_usable = u;
        }
      if (best == free_.end()) return;
      const int k = std::min(n, best_usable);
      best->second -= k;
      n -= k;
    }
  }

 private:
  static bool allowed(const std::vector<std::string>& types, const std::string& type) {
    return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
  }
  static int usable(const AllocatorJob& job, const std::string& type, int free) {
    const auto it = job.unusable_free_gpus_by_type.find(type);
    return std::max(0, free - (it == job.unusable_free_gpus_by_type.end() ? 0 : it->second));
  }
  std::map<std::string, int> free_;
};

bool share_a_type(const AllocatorJob& a, const AllocatorJob& b) {
  if (a.gpu_types.empty() || b.gpu_types.empty()) return true;
  for (const std::string& t : a.gpu_types)
    if (std::find(b.gpu_types.begin(), b.gpu_types.end(), t) != b.gpu_types.end()) return true;
  return false;
}

AllocatorDecision decision(const AllocatorJob& job, AllocAction action, int target, std::string code,
                           std::string reason) {
  AllocatorDecision d;
  d.key = job.key;
  d.action = action;
  d.target_gpus = target;
  d.reason_code = std::move(code);
  d.reason = std::move(reason);
  return d;
}

// Step 1: a running job that lost GPUs.
AllocatorDecision after_loss(const AllocatorJob& job) {
  const int alive = std::max(0, job.gpus_alive);
  if (job.table != nullptr && job.elastic) {
    if (auto entry = shrink_after_node_loss(*job.table, alive))
      return decision(job, AllocAction::kShrink, entry->gpus, "NodeLost",
                      "lost " + std::to_string(job.current_gpus - alive) + " GPUs: shrink " +
                          std::to_string(job.current_gpus) + " -> " + std::to_string(entry->gpus) + " (" +
                          entry->config.to_string() + ")");
  }
  return decision(job, AllocAction::kRequeue, 0, "NodeLost",
                  "lost " + std::to_string(job.current_gpus - alive) + " GPUs and no layout runs on the " +
                      std::to_string(alive) + " left: back to the queue, resuming from its checkpoint");
}

std::vector<ElasticJobView> victims_for(const AllocatorJob& waiting, const std::vector<AllocatorJob>& jobs,
                                        const std::map<std::string, AllocatorDecision>& decided,
                                        std::map<int, std::size_t>& index_of_view) {
  std::vector<ElasticJobView> views;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const AllocatorJob& j = jobs[i];
    auto d = decided.find(j.key);
    const bool keeps = d != decided.end() && d->second.action == AllocAction::kKeep;
    if (!j.running || !j.elastic || j.table == nullptr || !keeps || j.priority > waiting.priority) continue;
    if (!share_a_type(j, waiting)) continue;
    const int id = static_cast<int>(views.size());
    index_of_view[id] = i;
    views.push_back({id, j.current_gpus, j.table, j.overhead_s});
  }
  return views;
}

}  // namespace

const char* to_string(AllocAction action) {
  switch (action) {
    case AllocAction::kWait: return "wait";
    case AllocAction::kAdmit: return "admit";
    case AllocAction::kKeep: return "keep";
    case AllocAction::kGrow: return "scale-up";
    case AllocAction::kShrink: return "shrink";
    case AllocAction::kRequeue: return "requeue";
  }
  return "?";
}

std::vector<AllocatorDecision> allocate(const AllocatorInput& input) {
  std::vector<const AllocatorJob*> order;
  for (const AllocatorJob& j : input.jobs) order.push_back(&j);
  std::stable_sort(order.begin(), order.end(), [](const AllocatorJob* a, const AllocatorJob* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->arrival_order != b->arrival_order) return a->arrival_order < b->arrival_order;
    return a->key < b->key;
  });
  std::map<std::string, AllocatorDecision> decided;
  FreePool pool(input.free_gpus_by_type);

  // 1. Running jobs: lost GPUs shrink or requeue; the rest keep what they hold for now.
  for (const AllocatorJob* j : order) {
    if (!j->running) continue;
    if (j->gpus_alive >= 0 && j->gpus_alive < j->current_gpus) {
      decided[j->key] = after_loss(*j);  // the GPUs it keeps are not in the free pool
    } else {
      decided[j->key] = decision(*j, AllocAction::kKeep, j->current_gpus, "Running", "keep");
    }
  }

  // 2. Admission, FIFO by priority; the first job that cannot start blocks scale-ups.
  int waiting = 0;
  for (const AllocatorJob* j : order) {
    if (j->running) continue;
    if (j->initial_gpus <= 0) {
      decided[j->key] =
          decision(*j, AllocAction::kWait, 0, j->fits_nowhere_reason.empty() ? "FitsNowhere" : j->fits_nowhere_reason,
                   j->fits_nowhere_why.empty() ? "no plan fits the allowed GPU types" : j->fits_nowhere_why);
      continue;
    }
    const int free = pool.available(*j);
    if (j->initial_gpus <= free) {
      pool.take(*j, j->initial_gpus);
      decided[j->key] = decision(
          *j, AllocAction::kAdmit, j->initial_gpus, "Admitted",
          "admitted on " + std::to_string(j->initial_gpus) + " GPUs (" + std::to_string(free) + " free of its types)");
      continue;
    }
    ++waiting;
    AllocatorDecision wait =
        decision(*j, AllocAction::kWait, 0, "WaitingForGpus",
                 "needs " + std::to_string(j->initial_gpus) + " GPUs, " + std::to_string(free) + " free of its types");
    wait.queue_position = waiting;
    if (waiting == 1 && input.allow_preemption) {  // only the head of the queue may reclaim
      std::map<int, std::size_t> index_of_view;
      const auto views = victims_for(*j, input.jobs, decided, index_of_view);
      const PreemptionPlan plan = plan_preemption(j->initial_gpus, free, views);
      if (plan.feasible && !plan.shrinks.empty()) {
        std::string names;
        for (const Shrink& s : plan.shrinks) {
          const AllocatorJob& victim = input.jobs[index_of_view.at(s.job_id)];
          names += (names.empty() ? "" : ", ") + victim.key;
          decided[victim.key] =
              decision(victim, AllocAction::kShrink, s.to_gpus, "Preempted",
                       "gives " + std::to_string(s.from_gpus - s.to_gpus) + " GPUs back for " + j->key + ": shrink " +
                           std::to_string(s.from_gpus) + " -> " + std::to_string(s.to_gpus));
        }
        wait.reason_code = "Preempting";
        wait.reason += "; reclaiming " + std::to_string(plan.reclaimed_gpus) + " from " + names;
      } else if (!plan.reason.empty()) {
        wait.reason += "; nothing to reclaim: " + plan.reason;
      }
    }
    decided[j->key] = wait;
  }

  // 3. Scale-up while nobody waits: fewest GPUs first, each through the benefit check.
  if (waiting == 0) {
    std::vector<const AllocatorJob*> growers;
    for (const AllocatorJob* j : order)
      if (j->running && j->elastic && j->may_grow && j->table != nullptr &&
          decided[j->key].action == AllocAction::kKeep)
        growers.push_back(j);
    std::stable_sort(growers.begin(), growers.end(),
                     [](const AllocatorJob* a, const AllocatorJob* b) { return a->current_gpus < b->current_gpus; });
    for (const AllocatorJob* j : growers) {
      const int free = pool.available(*j);
      if (free <= 0) continue;
      if (j->seconds_since_rescale < j->min_rescale_interval_s) {
        decided[j->key].reason = "keep: rescaled " + std::to_string(static_cast<int>(j->seconds_since_rescale)) +
                                 " s ago, minimum interval " +
                                 std::to_string(static_cast<int>(j->min_rescale_interval_s)) + " s";
        decided[j->key].reason_code = "MinInterval";
        continue;
      }
      ElasticJobView view{0, j->current_gpus, j->table, j->overhead_s, j->remaining_s};
      BenefitCheckParams params;
      params.threshold_probability = j->benefit_threshold;
      auto choice = choose_scale_up(view, free, j->arrival_rate_per_s.value_or(input.arrival_rate_per_s),
                                    input.use_benefit_check, params);
      if (!choice) continue;
      AllocatorDecision& d = decided[j->key];
      d.benefit = choice->decision;
      if (choice->ends_before_restart_repays) {
        d.reason_code = "EndsBeforeRestartRepays";
        d.reason = "keep: scale-up to " + std::to_string(choice->target_gpus) +
                   " refused: " + ends_before_restart_repays_explain(*choice);
      } else if (choice->scale) {
        pool.take(*j, choice->target_gpus - j->current_gpus);
        d.action = AllocAction::kGrow;
        d.target_gpus = choice->target_gpus;
        d.reason_code = "BenefitCheckPassed";
        d.reason = "scale-up " + std::to_string(j->current_gpus) + " -> " + std::to_string(choice->target_gpus) + ": " +
                   choice->decision.explain();
      } else {
        d.reason_code = "BenefitCheckRefused";
        d.reason =
            "keep: scale-up to " + std::to_string(choice->target_gpus) + " refused: " + choice->decision.explain();
      }
    }
  }

  std::vector<AllocatorDecision> out;
  for (const AllocatorJob& j : input.jobs) out.push_back(decided.at(j.key));
  return out;
}

}  // namespace flotilla::scaler
