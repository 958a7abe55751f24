// Real kubectl against a real devcluster process: the fidelity test of issue 4.
#include <gtest/gtest.h>

#include <memory>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

const char* kCrd = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: trainingjobs.flotilla.io
spec:
  group: flotilla.io
  scope: Namespaced
  names: {plural: trainingjobs, singular: trainingjob, kind: TrainingJob, shortNames: [tj]}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      additionalPrinterColumns:
        - {name: Model, type: string, jsonPath: .spec.model}
        - {name: Batch, type: integer, jsonPath: .spec.globalBatchSize}
        - {name: Phase, type: string, jsonPath: .status.phase}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [model, globalBatchSize]
              properties:
                model: {type: string}
                globalBatchSize: {type: integer, minimum: 1}
                maxGpus: {type: integer, default: 64}
            status:
              type: object
              properties:
                phase: {type: string}
)";

std::string job(const std::string& name, const std::string& batch) {
  return "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: " + name +
         "\n  namespace: team-a\nspec:\n  model: llama-3-8b\n  globalBatchSize: " + batch + "\n";
}

// Each test drives its own devcluster (its folder named after the test) with the real kubectl,
// which is missing only where scripts/install-tools.sh has not run: then the test skips.
class DevclusterKubectl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DevclusterProcess::have_kubectl()) GTEST_SKIP() << flotilla::testing::tool_missing_message("kubectl");
    dc_ = std::make_unique<DevclusterProcess>(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(dc_->start()) << read_text(dc_->dir() / "devcluster.log");
  }
  std::unique_ptr<DevclusterProcess> dc_;
};

}  // namespace

TEST_F(DevclusterKubectl, NamespaceCrdCustomResourcesPrinterColumnsPatchDeleteWatch) {
  DevclusterProcess& dc = *dc_;

  auto r = dc.kubectl("create namespace team-a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("namespace/team-a created"), std::string::npos) << r.output;

  write_text(dc.dir() / "crd.yaml", kCrd);
  r = dc.kubectl("apply -f " + (dc.dir() / "crd.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Watch from now on, in the background, with event types.
  std::string watch_out = (dc.dir() / "watch.out").string();
  std::string watch_cmd = flotilla::testing::tool_path("kubectl") + " --kubeconfig " + dc.kubeconfig().string() + " --cache-dir " +
                          (dc.dir() / "kcache-watch").string() +
                          " get trainingjobs -n team-a --watch --output-watch-events > " + watch_out + " 2>&1 & echo $!";
  auto watcher = run_command(watch_cmd);
  pid_t watch_pid = std::stoi(watcher.output);

  write_text(dc.dir() / "good.yaml", job("good", "512"));
  r = dc.kubectl("apply -f " + (dc.dir() / "good.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trainingjob.flotilla.io/good created"), std::string::npos) << r.output;

  // Schema violation: kubectl exits non-zero and shows the field and the reason.
  write_text(dc.dir() / "bad.yaml", job("bad", "\"lots\""));
  r = dc.kubectl("apply -f " + (dc.dir() / "bad.yaml").string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("spec.globalBatchSize"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("must be of type integer"), std::string::npos) << r.output;
  write_text(dc.dir() / "bad2.yaml", job("bad2", "0"));
  r = dc.kubectl("apply -f " + (dc.dir() / "bad2.yaml").string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("greater than or equal to 1"), std::string::npos) << r.output;

  // Printer columns (server-side Table) and the schema default.
  r = dc.kubectl("get tj -n team-a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("NAME   MODEL        BATCH   PHASE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("good   llama-3-8b   512"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad"), std::string::npos) << "invalid objects are not stored: " << r.output;
  r = dc.kubectl("get trainingjob good -n team-a -o jsonpath={.spec.maxGpus}/{.metadata.generation}");
  EXPECT_EQ(r.output, "64/1");

  // Patch the spec: generation bumps; patch the status subresource: it does not.
  r = dc.kubectl("patch tj good -n team-a --type merge -p '{\"spec\":{\"globalBatchSize\":1024}}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("patch tj good -n team-a --subresource status --type merge -p '{\"status\":{\"phase\":\"Running\"}}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("get tj good -n team-a --no-headers");
  EXPECT_NE(r.output.find("good   llama-3-8b   1024   Running"), std::string::npos) << r.output;
  r = dc.kubectl("get trainingjob good -n team-a -o jsonpath={.metadata.generation}");
  EXPECT_EQ(r.output, "2");

  r = dc.kubectl("delete tj good -n team-a");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("get tj good -n team-a");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("NotFound"), std::string::npos) << r.output;

  bool saw_all = eventually([&] {
    std::string w = read_text(watch_out);
    return w.find("ADDED") != std::string::npos && w.find("MODIFIED") != std::string::npos &&
           w.find("DELETED") != std::string::npos;
  });
  ::kill(watch_pid, SIGTERM);
  EXPECT_TRUE(saw_all) << read_text(watch_out);
  std::string w = read_text(watch_out);
  EXPECT_NE(w.find("ADDED      good"), std::string::npos) << w;
  EXPECT_NE(w.find("DELETED    good"), std::string::npos) << w;
}

TEST_F(DevclusterKubectl, NodesAreVirtualGpuNodesAndCordonWorks) {
  DevclusterProcess& dc = *dc_;
  auto r = dc.kubectl("get nodes -l nvidia.com/gpu.product=H100-80GB -o jsonpath={.items[*].metadata.name}");
  EXPECT_EQ(r.output, "h100-0") << r.output;
  r = dc.kubectl("get node a100-0 -o 'jsonpath={.status.allocatable.nvidia\\.com/gpu}/{.metadata.labels.topology\\.kubernetes\\.io/zone}'");
  EXPECT_EQ(r.output, "8/zone-a") << r.output;
  r = dc.kubectl("cordon a100-0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("get nodes a100-0 --no-headers");
  EXPECT_NE(r.output.find("Ready,SchedulingDisabled"), std::string::npos) << r.output;
  // A node added through the API is adopted as a virtual GPU node.
  write_text(dc.dir() / "node.yaml",
             "apiVersion: v1\nkind: Node\nmetadata:\n  name: l4-0\n  labels:\n    nvidia.com/gpu.product: L4\n"
             "    nvidia.com/gpu.count: \"2\"\n");
  r = dc.kubectl("apply -f " + (dc.dir() / "node.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(eventually([&] {
    return dc.kubectl("get node l4-0 -o 'jsonpath={.status.allocatable.nvidia\\.com/gpu}/{.status.conditions[0].status}'").output ==
           "2/True";
  })) << dc.kubectl("get node l4-0 -o yaml").output;
  r = dc.kubectl("create configmap settings --from-literal=lr=0.001");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("get configmap settings -o jsonpath={.data.lr}");
  EXPECT_EQ(r.output, "0.001");
}

// kubectl debug PATCHes pods/<name>/ephemeralcontainers; kubectl v1.32 reads details.name of a
// 404 without a nil check, so a Status without details made it panic.
TEST_F(DevclusterKubectl, DebugSaysEphemeralContainersAreUnsupportedInsteadOfPanicking) {
  DevclusterProcess& dc = *dc_;
  auto r = dc.kubectl("run p1 --image=busybox");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc.kubectl("debug p1 --image=busybox");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // a panic exits 2
  EXPECT_EQ(r.output.find("panic"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ephemeral containers are disabled for this cluster"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("devcluster does not support ephemeral containers"), std::string::npos) << r.output;
  // The pod is untouched.
  r = dc.kubectl("get pod p1 -o jsonpath={.spec.ephemeralContainers}");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

// devcluster has no RBAC, so the true answer to `kubectl auth can-i` is yes (it used to be a
// 404 "could not find the requested resource").
TEST_F(DevclusterKubectl, AuthCanIAnswersYesForTheAdmin) {
  DevclusterProcess& dc = *dc_;
  auto r = dc.kubectl("auth can-i delete pods -n kube-system");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "yes\n");
  r = dc.kubectl("auth can-i --list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("*.*"), std::string::npos) << r.output;
  // Reviews are answers, not objects: nothing to list or get.
  auto [code, status] = dc.call("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
  EXPECT_EQ(code, 405) << status.dump();
  auto [created, review] = dc.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                   Json{{"spec", {{"resourceAttributes", {{"verb", "create"}, {"resource", "pods"}}}}}});
  EXPECT_EQ(created, 201);
  EXPECT_EQ(review["status"]["allowed"], true);
  EXPECT_EQ(review["spec"]["resourceAttributes"]["verb"], "create");
}
