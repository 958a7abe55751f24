// The Pod the operator creates for one node share of a plan: pinned to the packer's node
// (spec.nodeName), owned by its TrainingJob (garbage-collected with it), labelled with the job,
// carrying its plan annotation, running the trainer sidecar with the pod's GPU count as limit.
//
// Guarantees: pure; restartPolicy Never (a crashed sidecar fails the pod and the operator
//   re-plans, instead of the kubelet restarting it under a stale plan); POD_NAME/NAMESPACE/IP
//   from the downward API; the checkpoint volume mounted at checkpoint.path when given, with
//   fsGroup kWorkerImageGroup so the worker image's non-root user can write its checkpoints;
//   worker kind megatron: a memory-backed emptyDir at /dev/shm for torchrun's ranks.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/job_plan.h"

namespace flotilla::op {

// The user and group the flotilla-worker image runs as (images/stage-rootfs.sh, USER in
// images/worker/Containerfile). A volume Kubernetes mounts is root's; fsGroup makes it writable
// by this group (checked only when the volume's root does not already match: OnRootMismatch
// skips the recursive chown of a large checkpoint folder on every start).
inline constexpr int kWorkerImageGroup = 65532;

struct PodTemplate {
  // The container's command: the sidecar and its flags (on devcluster: absolute paths and
  // --kubeconfig; in an image: flotilla-sidecar on PATH, in-cluster config).
  std::vector<std::string> sidecar_command = {"flotilla-sidecar"};
  int termination_grace_seconds = 30;
  // The pods' ServiceAccount ("" = the namespace's default): the sidecar watches, reads and
  // patches pods of its job, so on a cluster with RBAC it needs one bound to those verbs
  // (the Helm chart's workerRbac).
  std::string service_account;
};

// Kubernetes SIGKILLs a deleted pod after terminationGracePeriodSeconds: the template's, or the
// job's stop grace plus kSidecarExitSeconds for the sidecar's last report, whichever is longer.
inline constexpr int kSidecarExitSeconds = 10;
int termination_grace_seconds(const JobSpec& spec, const PodTemplate& tmpl);

nlohmann::json pod_manifest(const JobSpec& spec, const PlanPod& pod, const PodPlan& plan, const PodTemplate& tmpl);

}  // namespace flotilla::op
