// A TrainingJob's plan, from the planner's placed plan to what the operator writes: the status
// `plan` block, one pod per node share, and each pod's `flotilla.io/plan` annotation.
//
// Guarantees: pure and deterministic. plan_job() asks plan_and_place() (planner/plan_and_place.h)
//   for the best placed plan within [min_gpus, max_gpus] on the snapshot, under the worker
//   kind's limits (reference worker: TP 1; Megatron-LM: one TP) and the job's fixed geometry
//   (micro-batch size and virtual shards once the job has run, and its DP under strict
//   elasticity), so a rescale never changes what the loss depends on. Every (stage, replica)
//   becomes one global rank in the reference worker's numbering (rank = replica x PP + stage);
//   a node's ranks form one pod named <job>-<node>-g<GPUs> (a pod's GPU count cannot change,
//   so another count is another pod). On failure: the planner's typed reason and one line with
//   the smallest change that fits.
//   Worker kind megatron: the placed plan is rendered by launch/ (operator/megatron_launch.h);
//   ranks are Megatron's (tp-dp-pp order), pods are the launcher's torchrun agents (node rank
//   r holds ranks [r·g, (r+1)·g), all pods of g GPUs; a node holding k·g GPUs of the job runs
//   k pods <job>-<node>-g<g>, <job>-<node>-g<g>-1, ...), megatron_args is the script and its
//   flags for every pod, and a plan Megatron-LM cannot express fails with reason
//   MegatronCannotRun and render's one line.
// Assumes: TP 1 for the reference worker.
// Caveats: to_status()/from_status() round-trip every field the operator reads back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/pod_plan.h"
#include "operator/job_spec.h"
#include "planner/plan_and_place.h"

namespace flotilla::op {

struct PlanPod {
  std::string name;
  std::string node;
  std::string gpu_type;
  int gpus = 0;
  std::vector<int> ranks;  // ascending global ranks
  // The largest predicted peak of the pod's own ranks (its GPU type, its stages), and of that
  // the memory headroom its type carried when planned (memory_headroom.h). A peak of 0: not
  // recorded (a status written before these fields; JobPlan::predicted_for() then falls back to
  // the stages').
  std::int64_t predicted_peak_bytes = 0;
  std::int64_t headroom_bytes = 0;
};

// A pod's predicted peak memory and the headroom in it.
struct PodPrediction {
  std::int64_t peak_bytes = 0;      // 0: the pod is not in the plan, or nothing was predicted
  std::int64_t headroom_bytes = 0;  // of peak_bytes
};

struct PlanStage {
  std::string gpu_type;
  int tp = 1;
  int first_block = 0;
  int last_block = 0;  // inclusive, as status.plan.stages[].lastLayer says
  std::vector<std::string> pods;
  std::int64_t predicted_peak_bytes = 0;
};

struct JobPlan {
  std::int64_t epoch = 0;
  int gpus = 0;  // every rank's GPUs, all stages and replicas
  int pp = 1;
  int dp = 1;
  int tp = 1;  // the first stage's; the reference worker runs TP 1 everywhere
  int micro_batch_size = 1;
  int micro_batches = 1;   // per pipeline per iteration
  int virtual_shards = 1;  // fixed for the job's life, so any DP sums gradients in one order
  std::string partition;  // "0:2,2:6": the worker's units per stage
  std::vector<PlanStage> stages;
  std::vector<PlanPod> pods;
  std::string rendezvous_pod;  // the pod holding global rank 0
  // Worker kind megatron: the script and its Megatron flags, the same for every pod (torchrun's
  // own flags come from each pod's ranks: launch::torchrun_argv()); empty for kind flotilla.
  std::vector<std::string> megatron_args;
  double iteration_seconds = 0;
  double tokens_per_second = 0;
  double usd_per_hour = 0;

  std::string summary() const;  // "PP3·DP2·TP1"
  // The pod's own prediction; for a plan without per-pod predictions, the largest of the stages
  // it runs ranks of. The headroom is the pod's.
  PodPrediction predicted_for(const std::string& pod) const;
  nlohmann::json to_status() const;
  // nullopt for no plan (null, absent) and for one that cannot be read; for the latter,
  // `unreadable_why` (when given) says why in a few words ("epoch: type must be number, …").
  static std::optional<JobPlan> from_status(const nlohmann::json& plan, std::string* unreadable_why = nullptr);
};

// Readers of a job's status that never throw, unlike json::value(), which throws on a value of
// the wrong type: a status edited by hand may hold anything, and a throw in the cluster pass
// would stall every job's decisions.
// - plan_integer(): status.plan.<field> when it is an integer, else nullopt.
// - plan_epoch_of(): status.plan.epoch as the operator writes it; 0 when there is none or it is
//   not an integer (an unreadable plan, JobPlan::from_status() says why).
// - number_at(): the number at `pointer` in `object`; 0 when absent or not a number.
std::optional<std::int64_t> plan_integer(const nlohmann::json& status, const char* field);
std::int64_t plan_epoch_of(const nlohmann::json& status);
double number_at(const nlohmann::json& object, const nlohmann::json::json_pointer& pointer);

struct PlanConstraints {
  int min_gpus = 1;
  int max_gpus = 0;                     // 0: no cap
  std::optional<int> micro_batch_size;  // fixed after the first plan
  std::optional<int> dp;                // fixed under strict elasticity
  std::optional<int> virtual_shards;    // fixed after the first plan
  // On failure, search for the smallest change that fits (up to ~20 more searches): off for
  // probes whose failure only steers a search for the smallest feasible count.
  bool suggest = true;
};

struct PlanOutcome {
  std::optional<JobPlan> plan;
  planner::PlaceFailure failure = planner::PlaceFailure::kNone;
  std::string reason;   // CamelCase, for conditions
  std::string message;  // one line, with the smallest change that fits when there is one
};

// The planner's model of the job: its inline modelSpec, else the preset it names (nullopt: none).
std::optional<planner::ModelSpec> planner_model(const JobSpec& spec);

PlanOutcome plan_job(const JobSpec& spec, const planner::ClusterSpec& cluster, const PlanConstraints& limits,
                     const planner::EvalContext& context, std::int64_t epoch);

// plan_job() once plan_and_place() succeeded (`placed.ok()`): the JobPlan, with a megatron job's
// launch rendered, or why it cannot run (OverBudget, MegatronCannotRun).
PlanOutcome plan_from_placed(const JobSpec& spec, const planner::PlaceResult& placed, const PlanConstraints& limits,
                             std::int64_t epoch);

// True when every worker would run the same under `a` as under `b`: the same pods on the same
// nodes with the same ranks, layout, layer split and batch geometry (epoch, barrier and
// predictions aside). A new epoch for such a plan would restart every worker for nothing.
bool same_workers(const JobPlan& a, const JobPlan& b);

// Seconds of training left at the job's current speed: the steps left (train_steps minus
// status.progress.step) times a step's seconds, as measured (the plan's predicted step time
// scaled by predicted over measured tokens/s, since a step's tokens are the same) or, before
// the workers report tokens/s, as predicted; nullopt when the plan predicts no step time.
std::optional<double> remaining_train_seconds(const JobPlan& plan, std::int64_t train_steps,
                                              const nlohmann::json& progress);

// What one pod runs under `plan` (barrier: the epoch its workers may start from).
PodPlan pod_plan_for(const JobSpec& spec, const JobPlan& plan, const PlanPod& pod, std::int64_t barrier);

std::string pod_name(const std::string& job, const std::string& node, int gpus);

}  // namespace flotilla::op
