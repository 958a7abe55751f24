// The Pod the operator creates for one node share of a plan: pinned to the packer's node
// (spec.nodeName), owned by its TrainingJob (garbage-collected with it), labelled with the job,
// carrying its plan annotation, running the trainer sidecar with the pod's GPU count as limit.
//
// Guarantees: pure; restartPolicy Never (a crashed sidecar fails the pod and the operator
//   re-plans, instead of the kubelet restarting it under a stale plan); POD_NAME/NAMESPACE/IP
//   from the downward API; the checkpoint volume mounted at checkpoint.path when given.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/job_plan.h"

namespace flotilla::op {

struct PodTemplate {
  // The container's command: the sidecar and its flags (on devcluster: absolute paths and
  // --kubeconfig; in an image: flotilla-sidecar on PATH, in-cluster config).
  std::vector<std::string> sidecar_command = {"flotilla-sidecar"};
  int termination_grace_seconds = 30;
};

nlohmann::json pod_manifest(const JobSpec& spec, const PlanPod& pod, const PodPlan& plan, const PodTemplate& tmpl);

}  // namespace flotilla::op
