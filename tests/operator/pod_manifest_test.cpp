// pod_manifest(): the worker pod runs the sidecar from the job's image with its checkpoint volume
// writable by the worker image's non-root user (images/worker/Containerfile: USER 65532:65532).
#include "operator/pod_manifest.h"

#include <gtest/gtest.h>

#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
using flotilla::op::testing::job_object;
using flotilla::op::testing::spec_of;

TEST(PodManifest, CheckpointVolumeIsWritableByTheWorkerImageUser) {
  const fo::JobSpec spec =
      spec_of(job_object(R"({"checkpoint": {"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}}})"));
  fo::PlanPod pod{"demo-0", "node-a", "A100-80", 2, {0, 1}};
  const nlohmann::json manifest = fo::pod_manifest(spec, pod, flotilla::PodPlan{}, fo::PodTemplate{});
  const nlohmann::json& pod_spec = manifest.at("spec");
  // 65532 is the user and group the image runs as; Kubernetes mounts volumes as root's.
  EXPECT_EQ(pod_spec.at("securityContext").at("fsGroup"), 65532);
  EXPECT_EQ(pod_spec.at("securityContext").at("fsGroupChangePolicy"), "OnRootMismatch");
  EXPECT_EQ(pod_spec.at("volumes").at(0).at("persistentVolumeClaim").at("claimName"), "ckpt");
  const nlohmann::json& container = pod_spec.at("containers").at(0);
  EXPECT_EQ(container.at("image"), "w:1");
  EXPECT_EQ(container.at("command"), nlohmann::json::array({"flotilla-sidecar"}));
  EXPECT_EQ(container.at("volumeMounts").at(0).at("mountPath"), "/ckpt");
}

TEST(PodManifest, AMegatronPodGetsAMemoryBackedDevShmBesideItsCheckpointVolume) {
  const fo::JobSpec spec = spec_of(job_object(R"({"worker": {"kind": "megatron", "megatron": {"script": "/m/p.py"}},
      "checkpoint": {"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}}})"));
  fo::PlanPod pod{"demo-0", "node-a", "A100-80", 2, {0, 1}};
  const nlohmann::json m = fo::pod_manifest(spec, pod, flotilla::PodPlan{}, fo::PodTemplate{});
  EXPECT_EQ(m["spec"]["volumes"],
            nlohmann::json::parse(R"([{"persistentVolumeClaim": {"claimName": "ckpt"}, "name": "checkpoint"},
                                      {"name": "dshm", "emptyDir": {"medium": "Memory"}}])"));
  EXPECT_EQ(m["spec"]["containers"][0]["volumeMounts"],
            nlohmann::json::parse(R"([{"name": "checkpoint", "mountPath": "/ckpt"},
                                      {"name": "dshm", "mountPath": "/dev/shm"}])"));
  // The reference worker needs none: no volume at all without a checkpoint volume.
  const nlohmann::json plain = fo::pod_manifest(spec_of(job_object()), pod, flotilla::PodPlan{}, fo::PodTemplate{});
  EXPECT_FALSE(plain["spec"].contains("volumes"));
  EXPECT_FALSE(plain["spec"]["containers"][0].contains("volumeMounts"));
}

TEST(PodManifest, RunsUnderTheConfiguredServiceAccount) {
  const fo::JobSpec spec = spec_of(job_object());
  fo::PlanPod pod{"demo-0", "node-a", "A100-80", 2, {0, 1}};
  fo::PodTemplate tmpl;
  nlohmann::json m = fo::pod_manifest(spec, pod, flotilla::PodPlan{}, tmpl);
  EXPECT_FALSE(m["spec"].contains("serviceAccountName")) << "unset: the namespace's default account";
  tmpl.service_account = "flotilla-worker";
  m = fo::pod_manifest(spec, pod, flotilla::PodPlan{}, tmpl);
  EXPECT_EQ(m["spec"]["serviceAccountName"], "flotilla-worker");
}

// Kubernetes SIGKILLs a deleted pod after terminationGracePeriodSeconds: it must outlast the
// sidecar's wait for its stopped workers (spec.worker.stopGracePeriodSeconds) plus its last report.
TEST(PodManifest, TerminationGraceOutlastsTheJobsStopGrace) {
  fo::PlanPod pod{"demo-0", "node-a", "A100-80", 2, {0, 1}};
  const auto grace = [&](const char* spec_json) {
    return fo::pod_manifest(spec_of(job_object(spec_json)), pod, flotilla::PodPlan{}, fo::PodTemplate{})
        .at("spec")
        .at("terminationGracePeriodSeconds")
        .get<int>();
  };
  EXPECT_EQ(grace("{}"), 30) << "20 s stop grace + 10 s is the template's 30 s";
  EXPECT_EQ(grace(R"({"worker": {"stopGracePeriodSeconds": 300}})"), 310);
  EXPECT_EQ(grace(R"({"worker": {"stopGracePeriodSeconds": 5}})"), 30) << "never below the template's";
}
