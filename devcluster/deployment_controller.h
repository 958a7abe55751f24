// A minimal apps/v1 Deployment controller: keeps spec.replicas pods of the current template
// running and reports status the way kube-controller-manager does, so `kubectl rollout status`
// and `helm install --wait` (kstatus) finish.
//
// Guarantees: each template gets a ReplicaSet `<deployment>-<pod-template-hash>` (FNV-32a of
//   the template, encoded as Kubernetes does; revision annotations as kube-controller-manager
//   writes them) owned by the Deployment, and pods are created from the template with that
//   label and a controller ownerReference to their ReplicaSet (so deleting the Deployment
//   deletes ReplicaSets and pods through the garbage collector); ReplicaSets carry spec.replicas
//   and status (replicas, ready, available) for kstatus and `helm --wait`; empty old ones beyond
//   revisionHistoryLimit are deleted;
//   finished (Succeeded/Failed) pods are deleted and replaced; RollingUpdate honours maxSurge
//   and maxUnavailable (ints or percentages, surge rounded up, unavailable down, both 0 means
//   maxUnavailable 1) and deletes not-ready old pods first; Recreate deletes every old pod and
//   waits until they are gone before creating new ones; spec.paused stops rollouts and scaling;
//   minReadySeconds delays availability. Status carries observedGeneration, replicas,
//   updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas and the Available,
//   Progressing (NewReplicaSetAvailable / ReplicaSetUpdated / ProgressDeadlineExceeded) and
//   ReplicaFailure (a pod create refused, with the API's message) conditions.
// Assumes: a pod is Ready when the kubelet says so (readiness probes included, see kubelet.h).
// Caveats: this one controller does both kube-controller-manager's Deployment and ReplicaSet
//   work for the ReplicaSets of Deployments; a ReplicaSet created on its own is stored but no
//   controller runs it. Pods matching the selector without an ownerReference are not adopted;
//   `kubectl rollout undo` is not supported (nothing rolls a Deployment back to an old
//   ReplicaSet's template).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "devcluster/api.h"

namespace flotilla::devcluster {

// Kubernetes' ComputeHash: FNV-32a of the template, written in decimal and mapped through the
// alphabet "bcdfghjklmnpqrstvwxz2456789" (SafeEncodeString).
std::string pod_template_hash(const Json& template_spec);

class DeploymentController {
 public:
  explicit DeploymentController(Api& api, std::chrono::milliseconds tick = std::chrono::milliseconds(50));
  ~DeploymentController();
  void start();
  void stop();

 private:
  void loop();
  void sync(const std::string& ns, const std::string& name);
  // Once a second, with the full pass: PodDisruptionBudget status (pdb_status.h), the
  // disruption controller's one job here, on this thread since it reads the same pods.
  void update_disruption_budgets();

  Api& api_;
  std::chrono::milliseconds tick_;
  std::shared_ptr<const Registry> builtin_registry_;
  const ResourceType* deployments_ = nullptr;
  const ResourceType* replicasets_ = nullptr;
  const ResourceType* budgets_ = nullptr;
  const ResourceType* pods_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  uint64_t cursor_ = 0;
};

}  // namespace flotilla::devcluster
