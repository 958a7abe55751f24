// One TrainingJob's reconcile as a pure function: what the operator observed (the job, its
// pods with their plan and report annotations, the cluster, the allocator's decision) in;
// what to do (the new status, pods to create, delete or re-annotate, events) out.
//
// The state machine (status.phase, status.plan.epoch E, status.plan.barrier B):
//   no plan  --allocator admits, plan fits--> plan E+1, pods created with B = E+1  (Pending)
//   no plan  --not admitted / fits nowhere--> Pending, Planned=False with the reason
//   plan E   --every pod reports Running for E--> Running
//   plan E   --GPUs lost, target changed, or a pod Failed--> plan E+1 with B = E: surviving
//            pods re-annotated, pods no longer in the plan deleted, new pods created  (Rescaling)
//   B < E    --every plan pod reports Stopped/Waiting for E and no other pod of the job is
//            left--> B = E on every pod: the sidecars start the new ranks       (Rescaling)
//   plan E   --every pod reports Succeeded--> Succeeded;  a pod gave up --> Failed
//   plan E   --a worker failed: plan E+1 as above, its barrier lifted only after the backoff;
//            the (spec.backoffLimit+1)-th failure in a row without progress --> Failed
//            (operator/crash_loop.h), its condition carrying the worker's error line
//   Failed   --the spec changed (a newer generation)--> Pending, no plan: admitted again
//   plan E   --lost GPUs and nothing fits on what is left, or requeued--> pods deleted, no
//            plan (pods: []), Pending until admitted again; training resumes from the checkpoint
// Guarantees: pure and deterministic; the status is written with the new epoch before any pod
//   is touched (the shell applies `status` first), so a restarted operator resumes a half-done
//   rescale from status.plan instead of starting another; a plan predicted to run out of memory
//   is never produced (plan_and_place checks every rank); reports of an older epoch are ignored.
// Assumes: `pods` are the job's pods (label flotilla.io/job), any phase, including deleting.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/pod_plan.h"
#include "operator/cluster_view.h"
#include "operator/job_plan.h"
#include "operator/job_spec.h"
#include "scaler/allocator.h"

namespace flotilla::op {

struct PodObservation {
  std::string name;
  std::string node;
  std::string phase;  // Pending, Running, Succeeded, Failed
  bool deleting = false;
  // Why a Pending pod has not started, as the kubelet or scheduler says it: a container's
  // waiting reason and message (ContainerCreating, ErrImagePull: ...), else the PodScheduled
  // condition's; "" when nothing says.
  std::string waiting_reason;
  std::string created;  // metadata.creationTimestamp (RFC 3339); "" when unknown
  std::optional<PodPlan> plan;
  std::optional<PodReport> report;
};

struct JobObservation {
  JobSpec spec;
  nlohmann::json status = nlohmann::json::object();
  std::vector<PodObservation> pods;
  const ClusterView* cluster = nullptr;
  std::optional<scaler::AllocatorDecision> decision;  // none yet: wait for the first pass
  // Another job's key when spec.checkpoint.path is that job's folder (checkpoint_claims.h): a
  // job without pods then waits for a folder of its own instead of being admitted.
  std::string checkpoint_owner;
  // Another job's key when any other job names the same folder (earlier or later): a running
  // job's change of checkpoint.path into it is refused (SpecApplied=False CheckpointPathInUse).
  std::string checkpoint_shared_with;
  std::string now;                                    // RFC 3339
};

struct PodCreate {
  PlanPod pod;
  PodPlan plan;
};

struct JobEvent {
  std::string type;  // Normal or Warning
  std::string reason;
  std::string message;
};

struct JobActions {
  std::optional<nlohmann::json> status;  // the whole new status, when it changed
  std::vector<PodCreate> create;
  std::vector<std::string> remove;
  std::vector<std::pair<std::string, PodPlan>> annotate;
  std::vector<JobEvent> events;
  std::optional<double> requeue_after_seconds;  // a relaunch waits for its backoff (crash_loop.h)
};

JobActions reconcile_job(const JobObservation& job, const planner::EvalContext& context);

// Sets condition `type` in status.conditions (lastTransitionTime only changes with status).
void set_condition(nlohmann::json& status, const std::string& type, bool value, const std::string& reason,
                   const std::string& message, std::int64_t generation, const std::string& now);

}  // namespace flotilla::op
