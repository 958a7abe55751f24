#include "operator/pod_manifest.h"

#include <algorithm>

namespace flotilla::op {

int termination_grace_seconds(const JobSpec& spec, const PodTemplate& tmpl) {
  // The sidecar stops its workers within the job's stop grace, then reports and exits.
  return std::max(tmpl.termination_grace_seconds, spec.stop_grace_seconds + kSidecarExitSeconds);
}

nlohmann::json pod_manifest(const JobSpec& spec, const PlanPod& pod, const PodPlan& plan, const PodTemplate& tmpl) {
  using Json = nlohmann::json;
  auto field_env = [](const char* name, const char* path) {
    return Json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
  };
  Json container = {
      {"name", "trainer"},
      {"image", spec.worker_image},
      {"command", tmpl.sidecar_command},
      {"env", Json::array({field_env("POD_NAME", "metadata.name"), field_env("POD_NAMESPACE", "metadata.namespace"),
                           field_env("POD_IP", "status.podIP")})},
      {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(pod.gpus)}}}}}};
  Json spec_json = {{"nodeName", pod.node},
                    {"restartPolicy", "Never"},
                    {"terminationGracePeriodSeconds", termination_grace_seconds(spec, tmpl)},
                    {"securityContext", {{"fsGroup", kWorkerImageGroup}, {"fsGroupChangePolicy", "OnRootMismatch"}}},
                    {"containers", Json::array()}};
  if (!tmpl.service_account.empty()) spec_json["serviceAccountName"] = tmpl.service_account;
  Json volumes = Json::array(), mounts = Json::array();
  // Without a volume, checkpoint.path must be a path every node shares (devcluster: one machine).
  if (spec.checkpoint_volume.is_object()) {
    Json volume = spec.checkpoint_volume;
    volume["name"] = "checkpoint";
    volumes.push_back(volume);
    mounts.push_back({{"name", "checkpoint"}, {"mountPath", spec.checkpoint_path}});
  }
  // torchrun's ranks share tensors through /dev/shm (NCCL's intra-node transport, data loader
  // workers); a container's default 64 MiB makes them fail with bus errors.
  if (spec.worker_kind == WorkerKind::kMegatron) {
    volumes.push_back({{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}});
    mounts.push_back({{"name", "dshm"}, {"mountPath", "/dev/shm"}});
  }
  if (!volumes.empty()) {
    spec_json["volumes"] = volumes;
    container["volumeMounts"] = mounts;
  }
  Json meta = {{"name", pod.name},
               {"namespace", spec.ns},
               {"labels", {{kJobLabel, spec.name}, {"app.kubernetes.io/managed-by", "flotilla"}}},
               {"annotations", {{kPlanAnnotation, encode_pod_plan(plan)}}},
               {"ownerReferences", Json::array({{{"apiVersion", "flotilla.io/v1alpha1"},
                                                 {"kind", "TrainingJob"},
                                                 {"name", spec.name},
                                                 {"uid", spec.uid},
                                                 {"controller", true},
                                                 {"blockOwnerDeletion", true}}})}};
  spec_json["containers"].push_back(container);
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec_json}};
}

}  // namespace flotilla::op
