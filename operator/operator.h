// The operator: kube::Controller over TrainingJobs (owning their Pods, watching Nodes) with a
// cluster-wide allocator pass, and a thin shell that applies what the pure reconcile decides.
//
// Guarantees:
//   - The cluster pass (one de-duplicated key) runs the allocator (scaler/allocator.h) over
//     every job, node and pod in the caches, keeps each job's decision, and queues the jobs
//     whose decision changed. λ counts the TrainingJobs seen created within the window.
//   - A job's reconcile builds its observation from the caches, calls reconcile_job(), then
//     writes the status first (optimistic concurrency: a Conflict retries with backoff), and
//     only then deletes, creates and re-annotates pods, and records events. A restarted
//     operator therefore resumes from status.plan (epoch and barrier) and never launches the
//     same epoch twice; pod creates of a name that exists are not an error.
//   - Metrics (metrics.h) count every decision, reconcile and preemption.
//   - Every request the API server refuses (a watch, a status write, a pod or event write) is
//     logged once per distinct error, naming the request (api_errors.h): a 403 says which RBAC
//     permission is missing.
// Assumes: pods are created only by this operator (label flotilla.io/job).
// Caveats: one worker thread for job reconciles plus the cluster pass, which is enough at the
//   scale bench/operator_scale measures.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>

#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "operator/api_errors.h"
#include "operator/checkpoint_claims.h"
#include "operator/cluster_view.h"
#include "operator/job_reconciler.h"
#include "operator/job_spec.h"
#include "operator/job_table.h"
#include "operator/measured_profile.h"
#include "operator/memory_headroom.h"
#include "operator/metrics.h"
#include "operator/pod_expectations.h"
#include "operator/pod_manifest.h"
#include "planner/gpu_catalog.h"
#include "planner/network.h"
#include "planner/profile.h"
#include "scaler/allocator.h"

namespace flotilla::op {

struct OperatorOptions {
  std::string ns;  // "" = all namespaces
  PodTemplate pod_template;
  bool use_benefit_check = true;
  bool allow_preemption = true;  // FlexTrain §5.2 reclaiming for the head of the queue
  PolicyDefaults policy;         // cluster-wide defaults of a job's elasticity fields
  double arrival_window_s = 8 * 3600.0;  // λ's window (the policy's window_seconds)
  double restart_overhead_s = 30;  // until measured
  std::string catalog_override_yaml;
};

extern const kube::Resource kTrainingJobs;

class Operator {
 public:
  Operator(std::shared_ptr<kube::Client> client, OperatorOptions options, Metrics& metrics);
  // Blocks until stop; false if the caches never synced.
  bool run(std::stop_token stop);
  bool ready() const { return ready_.load(); }

 private:
  kube::Result<kube::Action> reconcile(const std::string& key, const kube::ReconcileContext& ctx);
  void cluster_pass(const kube::ReconcileContext& ctx);
  kube::Result<kube::Action> reconcile_one(const std::string& key, const kube::ReconcileContext& ctx);
  const JobTable& table_for(const JobSpec& spec, const nlohmann::json& status);
  // Every job's pods as observed, kept while the pod cache does not move.
  struct PodIndex {
    std::map<std::string, std::vector<PodObservation>> by_job;
    // "<ns>/<pod>" -> (resourceVersion, observation): a pod whose version did not move is not
    // parsed again on the next rebuild.
    std::map<std::string, std::pair<std::string, PodObservation>> observed;
  };
  // The cluster view and every job's pods, rebuilt only when the node, pod or job cache moved on
  // (their resource versions): a steady-state reconcile does not re-read 1,000 nodes and pods,
  // and a job's status write makes the next one re-read only the jobs' plans.
  struct Snapshot {
    std::string nodes_version, pods_version, jobs_version;
    ClusterView view;
    std::shared_ptr<const PodIndex> pods;
    CheckpointClaims claims;  // whose checkpoint folder is whose (checkpoint_claims.h)
  };
  std::shared_ptr<const Snapshot> snapshot(const kube::ReconcileContext& ctx);
  // Online profiling: fold the reports of the running epoch into the job's own compute model
  // once they are steady; the job's later tables and plans are timed by it (measured_profile.h).
  void update_measured_profile(const nlohmann::json& job, const JobObservation& obs);
  // Assumes one controller worker (run() sets none): the reference stays valid for the
  // reconcile that asked for it.
  const planner::EvalContext& eval_for(const std::string& key) const;
  void apply(const JobSpec& spec, const nlohmann::json& job, const struct JobActions& actions);
  void record_metrics(const std::vector<nlohmann::json>& jobs, const Snapshot& snap);
  // Logs a refused status write (not a Conflict) and returns the error for the controller's retry.
  kube::Error report_status_write(const std::string& key, const kube::Error& error);
  void record_event(const nlohmann::json& job, const std::string& type, const std::string& reason,
                    const std::string& message);
  // Observes the rescale phases a status write completed (rescale_timing.h).
  void observe_rescale(const std::string& key, const nlohmann::json& before, const nlohmann::json& after);

  std::shared_ptr<kube::Client> client_;
  OperatorOptions options_;
  Metrics& metrics_;
  ApiErrorReporter api_errors_;
  planner::GpuCatalog catalog_;
  planner::ComputeModel compute_;
  planner::NetworkModel network_;
  planner::EvalContext eval_;
  kube::EventRecorder events_;
  kube::Controller* controller_ = nullptr;
  std::atomic<bool> ready_{false};
  std::mutex mu_;
  // key -> (decision, the status.plan.epoch it was made on)
  std::map<std::string, std::pair<scaler::AllocatorDecision, std::int64_t>> decisions_;
  // Job tables by job_table_key() (plus the job and its profile signature once measured) on the
  // capacity named by tables_capacity_ (cleared when the capacity changes); a pass drops the
  // tables no job used.
  std::string tables_capacity_;
  std::map<std::string, JobTable> tables_;
  planner::ClusterSpec pass_capacity_;        // of the pass running now
  std::set<std::string> pass_tables_used_;    // keys the pass running now asked for
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mu_
  std::map<std::string, double> barrier_lifted_at_s_;
  PodExpectations expectations_;  // pods created/deleted and not yet seen in the pod cache  // key -> when its barrier lifted
  struct MeasuredCompute {
    std::int64_t epoch = 0;        // the plan epoch being measured
    std::int64_t first_step = -1;  // the lowest step reported under it (warm-up counts from it)
    std::string signature;         // of the folded profile; "" while none
    std::vector<MeasuredRatio> ratios;  // folded
    std::unique_ptr<planner::ProfileSet> profiles;
    std::unique_ptr<planner::ComputeModel> compute;
    planner::EvalContext eval;
  };
  std::map<std::string, MeasuredCompute> measured_;  // key -> the job's measured compute model
};

}  // namespace flotilla::op
