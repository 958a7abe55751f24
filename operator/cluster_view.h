// The cluster as one reconcile sees it: GPU nodes (type, zone, capacity, health), the GPUs
// every pod holds, and the GPUs every live job's current plan assigns, built from the informer
// caches' Node, Pod and TrainingJob objects.
//
// Two views of a node's GPUs, for two questions:
// - held(): what pods hold now (the kubelet's view). A new pod is created only where it fits
//   this, since the kubelet refuses one that does not.
// - taken(): what the allocator and the planner must not give away: the plans of live jobs
//   (planned_jobs), plus pods of anything else (other workloads, finished or deleted jobs whose
//   pods still run). A shrinking job's leaving pods are free in this view and a growing job's
//   not-yet-created pods are taken, so a decision made between a plan and its pods neither
//   preempts twice for the same GPUs nor hands out the same GPUs twice. A live job takes, on
//   each node, the larger of what its plan puts there and what its pods of that plan's epoch or
//   later (not being deleted) hold: the caches of jobs and pods are separate watches, and a
//   job's new pods may be seen before its new plan.
//
// Guarantees: pure. A node counts as healthy when its Ready condition is True and it is not
//   being deleted or cordoned; its GPU type is the catalog's canonical name for the
//   `nvidia.com/gpu.product` label (aliases and case folded), or "" when unknown. A pod holds
//   its `nvidia.com/gpu` limit (else request) on its node until it is Succeeded or Failed. A job
//   is live (its plan counts) unless its phase is Succeeded or Failed or its spec of this
//   generation was refused (Planned=False, InvalidSpec: the allocator skips it). A live job whose plan has no pods
//   (requeued) takes none of the pods of that plan's epoch or before.
// Assumes: one GPU type per node (true of every cloud instance type); a live job's pods outside
//   its plan are being deleted by its own reconcile.
// Caveats: GPUs of a pod being deleted stay held until the pod is gone (the kubelet's view). A
//   pod that never finishes terminating (a stuck finalizer) is free in taken() and held in
//   held(): a pod planned onto its GPUs waits for it until the job's pod start timeout, counted
//   from leaving_due, leaves the node out. A view built without jobs (planned_jobs empty) has
//   taken() == held().
// Cost: O((nodes + pods) log nodes), so a reconcile stays cheap on 1,000 nodes
//   (bench/operator_scale).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/cluster.h"
#include "planner/gpu_catalog.h"

namespace flotilla::op {

struct NodeView {
  std::string name;
  std::string gpu_type;  // catalog name; "" when the label names no catalog type
  std::string zone;
  int gpus = 0;  // allocatable
  bool healthy = false;
  std::map<std::string, int> held_by_job;  // "<ns>/<job label>" ("" for pods of no job) -> GPUs
  // Of held_by_job, the pods not being deleted, by the epoch of their plan annotation
  // (kUnknownEpoch when unreadable, which counts as current).
  std::map<std::string, std::map<std::int64_t, int>> staying_by_job_epoch;
  std::map<std::string, int> planned_by_job;  // "<ns>/<name>" of a live job -> GPUs its plan puts here
  // The latest deletionTimestamp (RFC 3339) of a pod being deleted here, "" if none: when the
  // pods that are leaving were due to be gone.
  std::string leaving_due;
  int held() const;
};

inline constexpr std::int64_t kUnknownEpoch = INT64_MAX;

struct ClusterView {
  std::vector<NodeView> nodes;
  // Node name -> index in `nodes`, filled by build_cluster_view(); find() checks each hit and
  // scans when the index is missing or stale (views built by hand), so it is never wrong.
  std::map<std::string, std::size_t> index_by_name;
  // Live jobs (add_job_plan_to_view) -> their plan's epoch; their plans are in planned_by_job.
  std::map<std::string, std::int64_t> planned_jobs;
  const NodeView* find(const std::string& name) const;  // O(log nodes) on a built view
  // GPUs of the node not to be given away: live jobs' plans and every other pod's GPUs.
  int taken(const NodeView& node) const;
  int free_on(const NodeView& node) const;  // max(0, gpus - taken)
  // Of taken(node), the share of one job (its plan's, or its pods' when it is not live).
  int own_share(const NodeView& node, const std::string& job) const;
  // The node's GPUs not taken by anyone but `job`: gpus - taken + own_share; negative when plans
  // overlap there.
  int free_to(const NodeView& node, const std::string& job) const;
  // Free GPUs by type on healthy nodes (what neither a live job's plan nor another pod takes).
  std::map<std::string, int> free_by_type() const;
  // The planner's snapshot for one job: healthy nodes of known type with the GPUs free to it,
  // i.e. not taken by others; what the job itself takes (its plan, or its pods when it has no
  // plan in the view) counts as free unless `exclude_own` is set. Nodes named in `leave_out`
  // are not in it (unavailable_nodes.h).
  planner::ClusterSpec snapshot_for(const std::string& job_key, bool exclude_own = false,
                                    const std::set<std::string>& leave_out = {}) const;
};

int pod_gpus(const nlohmann::json& pod);

// The pieces of build_cluster_view(), for callers that visit the caches without copying them:
// add every node first (add_node_to_view), then every pod and job in any order.
void add_node_to_view(ClusterView& view, const nlohmann::json& node, const planner::GpuCatalog& catalog);
// `plan_epoch` is the epoch of the pod's plan annotation (a caller that parsed it passes it; the
// short form reads it from the pod).
void add_pod_to_view(ClusterView& view, const nlohmann::json& pod, const std::string& job_label,
                     std::int64_t plan_epoch);
void add_pod_to_view(ClusterView& view, const nlohmann::json& pod, const std::string& job_label);
// A TrainingJob: when live, it joins planned_jobs and its status.plan's pods take their GPUs. A
// plan without an epoch or pods is no plan (as JobPlan::from_status reads it).
void add_job_plan_to_view(ClusterView& view, const nlohmann::json& job);
// Forgets every job's plan (planned_jobs, planned_by_job); what pods hold is kept.
void clear_plans(ClusterView& view);
// `view` with its jobs' plans replaced by those of `jobs` (what pods hold is kept).
ClusterView with_plans_of(const ClusterView& view, const std::vector<nlohmann::json>& jobs);

ClusterView build_cluster_view(const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods,
                               const planner::GpuCatalog& catalog, const std::string& job_label,
                               const std::vector<nlohmann::json>& jobs = {});

}  // namespace flotilla::op
