// The TrainingJob CRD as a user meets it: applied with real kubectl to the real devcluster,
// `kubectl explain` documents every spec field, defaults fill what a manifest leaves out, a bad
// manifest is refused with field paths, printer columns show the plan, and status is a
// subresource. Expected values are the issue's contract, written out by hand here.
#include <gtest/gtest.h>

#include "tests/common/tools.h"
#include "tests/devcluster/devcluster_process.h"

using namespace devcluster_test;

namespace {

std::string crd_dir() { return std::string(FLOTILLA_SOURCE_DIR) + "/crds"; }

const char* kGoodJob = R"(apiVersion: flotilla.io/v1alpha1
kind: TrainingJob
metadata: {name: demo}
spec:
  model: small
  globalBatchSize: 8
  trainSteps: 30
  worker: {image: flotilla-worker:dev, data: /data/tiny.txt}
  checkpoint: {path: /tmp/ckpt}
)";

const char* kBadJob = R"(apiVersion: flotilla.io/v1alpha1
kind: TrainingJob
metadata: {name: bad}
spec:
  model: small
  globalBatchSize: -8
  trainSteps: 0
  worker: {kind: pytorch, image: x}
  elasticity: {mode: loose}
  checkpoint: {}
  backoffLimit: -1
)";

class TrainingJobCrd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DevclusterProcess::have_kubectl()) GTEST_SKIP() << flotilla::testing::tool_missing_message("kubectl");
    ASSERT_TRUE(dc_.start()) << read_text(dc_.dir() / "devcluster.log");
    auto r = dc_.kubectl("apply -f " + crd_dir());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_NE(r.output.find("customresourcedefinition.apiextensions.k8s.io/trainingjobs.flotilla.io created"),
              std::string::npos)
        << r.output;
    // kubectl caches discovery; the short name resolves once the CRD is established.
    ASSERT_TRUE(eventually([&] { return dc_.kubectl("get tj").exit_code == 0; }));
  }
  DevclusterProcess dc_{"crd"};
};

}  // namespace

TEST_F(TrainingJobCrd, ExplainDocumentsEverySpecField) {
  auto r = dc_.kubectl("explain tj.spec");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* field : {"model\t", "modelSpec\t", "globalBatchSize\t", "trainSteps\t", "seed\t", "worker\t",
                            "checkpoint\t", "resources\t", "objective\t", "budget\t", "elasticity\t", "priority\t",
                            "backoffLimit\t"})
    EXPECT_NE(r.output.find(std::string("  ") + field), std::string::npos) << field << " missing in\n" << r.output;
  for (const std::string sub : {"worker", "checkpoint", "resources", "elasticity"}) {
    r = dc_.kubectl("explain tj.spec." + sub);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("DESCRIPTION:"), std::string::npos) << r.output;
  }
  r = dc_.kubectl("explain tj.spec.elasticity.mode");
  EXPECT_NE(r.output.find("strict"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bit-for-bit"), std::string::npos) << r.output;
}

TEST_F(TrainingJobCrd, DefaultsFillWhatTheManifestLeavesOut) {
  write_text(dc_.dir() / "good.yaml", kGoodJob);
  auto r = dc_.kubectl("apply -f " + (dc_.dir() / "good.yaml").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc_.kubectl("get tj demo -o json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json spec = Json::parse(r.output)["spec"];
  EXPECT_EQ(spec["worker"]["kind"], "flotilla");
  EXPECT_EQ(spec["checkpoint"]["intervalSteps"], 10);
  EXPECT_EQ(spec["elasticity"]["mode"], "strict");
  // The scaling policy's numbers are left unset: the operator's cluster-wide flags fill them.
  EXPECT_FALSE(spec["elasticity"].contains("benefitThreshold"));
  EXPECT_FALSE(spec["elasticity"].contains("windowSeconds"));
  EXPECT_FALSE(spec["elasticity"].contains("minRescaleIntervalSeconds"));
  EXPECT_FALSE(spec["elasticity"].contains("podStartTimeoutSeconds"));
  EXPECT_EQ(spec["resources"]["minGPUs"], 1);
  EXPECT_EQ(spec["objective"], "throughput");
  EXPECT_EQ(spec["priority"], 0);
  EXPECT_EQ(spec["backoffLimit"], 3);
  EXPECT_EQ(spec["worker"]["stopGracePeriodSeconds"], 20);
  EXPECT_EQ(spec["seed"], 1234);
}

TEST_F(TrainingJobCrd, BadManifestIsRefusedWithFieldPaths) {
  write_text(dc_.dir() / "bad.yaml", kBadJob);
  auto r = dc_.kubectl("apply -f " + (dc_.dir() / "bad.yaml").string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  for (const char* refusal :
       {"spec.checkpoint.path: Required value", "spec.elasticity.mode: Unsupported value: \"loose\"",
        "spec.globalBatchSize: Invalid value: -8", "spec.trainSteps: Invalid value: 0",
        "spec.worker.kind: Unsupported value: \"pytorch\"",
        "spec.backoffLimit: Invalid value: -1"})
    EXPECT_NE(r.output.find(refusal), std::string::npos) << refusal << "\n" << r.output;
  // A manifest without a spec at all, or without the model, names what is missing.
  write_text(dc_.dir() / "nospec.yaml", "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: x}\n");
  r = dc_.kubectl("apply -f " + (dc_.dir() / "nospec.yaml").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("spec: Required value"), std::string::npos) << r.output;
  r = dc_.kubectl("get tj -o name");
  EXPECT_EQ(r.output, "") << "nothing invalid was stored";
}

TEST_F(TrainingJobCrd, PrinterColumnsShowThePlanAndStatusIsASubresource) {
  write_text(dc_.dir() / "good.yaml", kGoodJob);
  ASSERT_EQ(dc_.kubectl("apply -f " + (dc_.dir() / "good.yaml").string()).exit_code, 0);
  auto r = dc_.kubectl(
      "patch tj demo --subresource=status --type=merge -p "
      "'{\"status\":{\"phase\":\"Running\",\"plan\":{\"epoch\":2,\"summary\":\"PP3·DP2·TP1\",\"gpus\":6,\"pp\":3,"
      "\"dp\":2,\"tp\":1},\"progress\":{\"step\":17,\"tokensPerSecond\":1234.5}},\"spec\":{\"trainSteps\":99}}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = dc_.kubectl("get tj demo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* column : {"PHASE", "TOKENS/S", "Running", "PP3·DP2·TP1", " 6 ", " 17 "})
    EXPECT_NE(r.output.find(column), std::string::npos) << column << "\n" << r.output;
  // The status subresource ignores spec changes, as kube-apiserver does.
  r = dc_.kubectl("get tj demo -o jsonpath={.spec.trainSteps}/{.status.plan.epoch}");
  EXPECT_EQ(r.output, "30/2");
}
