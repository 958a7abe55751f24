// parse_job_spec(): typed fields from a TrainingJob, one line with the field path otherwise.
#include "operator/job_spec.h"

#include <gtest/gtest.h>

#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
using flotilla::op::testing::job_object;

namespace {
std::string error_of(const nlohmann::json& job) {
  auto r = fo::parse_job_spec(job);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "";
}
}  // namespace

TEST(JobSpec, ReadsEveryFieldWithDefaults) {
  const fo::JobSpec s = std::get<fo::JobSpec>(
      fo::parse_job_spec(job_object(R"({"priority": 3, "resources": {"gpuTypes": ["A100-80"], "maxGPUs": 8}})")));
  EXPECT_EQ(s.key(), "team/demo");
  EXPECT_EQ(s.model, "small");
  EXPECT_EQ(s.global_batch_size, 8);
  EXPECT_EQ(s.train_steps, 100);
  EXPECT_EQ(s.worker_kind, fo::WorkerKind::kFlotilla);
  EXPECT_EQ(s.checkpoint_interval_steps, 10);
  EXPECT_EQ(s.elasticity, fo::ElasticityMode::kStrict);
  EXPECT_EQ(s.min_rescale_interval_seconds, 0);
  EXPECT_EQ(s.benefit_threshold, 0.6);
  EXPECT_EQ(s.priority, 3);
  EXPECT_EQ(s.backoff_limit, 3);  // the CRD's default
  EXPECT_EQ(s.stop_grace_seconds, 20);  // the CRD's default
  EXPECT_EQ(s.max_gpus, 8);
  EXPECT_EQ(s.min_gpus, 1);
  EXPECT_EQ(s.gpu_types, std::vector<std::string>{"A100-80"});
}

TEST(JobSpec, UnsetElasticityFieldsTakeTheClusterPolicyAndSetOnesWin) {
  nlohmann::json job = job_object();
  job["spec"]["elasticity"] = {{"mode", "strict"}};
  fo::PolicyDefaults cluster;
  cluster.benefit_threshold = 0.9;
  cluster.window_seconds = 600;
  cluster.min_rescale_interval_seconds = 300;
  cluster.pod_start_timeout_seconds = 1800;
  fo::JobSpec s = std::get<fo::JobSpec>(fo::parse_job_spec(job, cluster));
  EXPECT_EQ(s.benefit_threshold, 0.9);
  EXPECT_EQ(s.window_seconds, 600);
  EXPECT_EQ(s.min_rescale_interval_seconds, 300);
  EXPECT_EQ(s.pod_start_timeout_seconds, 1800);
  job["spec"]["elasticity"]["benefitThreshold"] = 0.25;
  job["spec"]["elasticity"]["minRescaleIntervalSeconds"] = 5;
  job["spec"]["elasticity"]["podStartTimeoutSeconds"] = 0;
  s = std::get<fo::JobSpec>(fo::parse_job_spec(job, cluster));
  EXPECT_EQ(s.benefit_threshold, 0.25);
  EXPECT_EQ(s.min_rescale_interval_seconds, 5);
  EXPECT_EQ(s.pod_start_timeout_seconds, 0);
  // Without flags: FlexTrain's P_th 0.6, 8 h, 60 s.
  s = std::get<fo::JobSpec>(fo::parse_job_spec(job_object(R"({"elasticity": {"minRescaleIntervalSeconds": null}})")));
  EXPECT_EQ(s.window_seconds, 28800);
  EXPECT_EQ(s.min_rescale_interval_seconds, 60);
}

TEST(JobSpec, BadFieldsNameTheirPath) {
  EXPECT_EQ(error_of(job_object(R"({"globalBatchSize": -8})")), "spec.globalBatchSize: must be at least 1, got -8");
  EXPECT_EQ(error_of(job_object(R"({"trainSteps": "ten"})")), "spec.trainSteps: must be an integer");
  EXPECT_EQ(error_of(job_object(R"({"worker": {"data": null}})")),
            "spec.worker.data: required for worker kind flotilla (a text file the pods can read)");
  EXPECT_EQ(error_of(job_object(R"({"checkpoint": {"path": "relative/dir"}})")),
            "spec.checkpoint.path: must be an absolute path, got 'relative/dir'");
  EXPECT_EQ(error_of(job_object(R"({"elasticity": {"mode": "loose"}})")),
            "spec.elasticity.mode: must be strict, relaxed or off, got 'loose'");
  EXPECT_EQ(error_of(job_object(R"({"backoffLimit": -1})")), "spec.backoffLimit: must be at least 0, got -1");
  EXPECT_EQ(error_of(job_object(R"({"backoffLimit": 0})")), "");
  EXPECT_EQ(error_of(job_object(R"({"elasticity": {"podStartTimeoutSeconds": -1}})")),
            "spec.elasticity.podStartTimeoutSeconds: must be at least 0, got -1");
  EXPECT_EQ(std::get<fo::JobSpec>(fo::parse_job_spec(job_object())).pod_start_timeout_seconds, 600);
  EXPECT_EQ(std::get<fo::JobSpec>(fo::parse_job_spec(job_object(R"({"elasticity": {"podStartTimeoutSeconds": 0}})")))
                .pod_start_timeout_seconds,
            0);
  EXPECT_EQ(error_of(job_object(R"({"worker": {"stopGracePeriodSeconds": 0}})")),
            "spec.worker.stopGracePeriodSeconds: must be at least 1, got 0");
  EXPECT_EQ(error_of(job_object(R"({"worker": {"stopGracePeriodSeconds": 7200}})")),
            "spec.worker.stopGracePeriodSeconds: must be at most 3600 (one hour), got 7200");
  EXPECT_EQ(error_of(job_object(R"({"resources": {"minGPUs": 4, "maxGPUs": 2}})")),
            "spec.resources.maxGPUs: must be at least resources.minGPUs (4)");
  EXPECT_EQ(
      error_of(job_object(R"({"modelSpec": {"numLayers": 2, "hidden": 30, "heads": 4, "vocabSize": 9, "seqLen": 8}})")),
      "spec.modelSpec.heads: must divide modelSpec.hidden");
  // The model is refused where the field can be named, not at launch: the reference worker
  // knows its own models by their exact name, Megatron-LM any planner preset or modelSpec.
  EXPECT_EQ(error_of(job_object(R"({"model": "gpt-17"})")),
            "spec.model: worker kind flotilla trains the reference worker's models (tiny, small, gpt-125m), not "
            "'gpt-17'");
  EXPECT_EQ(error_of(job_object(R"({"model": "llama-3-8b"})")),
            "spec.model: worker kind flotilla trains the reference worker's models (tiny, small, gpt-125m), not "
            "'llama-3-8b'; Llama-3-8B runs with worker.kind megatron");
  EXPECT_EQ(error_of(job_object(R"({"model": "mine", "modelSpec": {"numLayers": 2, "hidden": 32, "heads": 4, )"
                                R"("vocabSize": 9, "seqLen": 8}})")),
            "spec.modelSpec: worker kind flotilla trains only the reference worker's models (tiny, small, "
            "gpt-125m); an inline model needs worker.kind megatron");
  const std::string megatron = R"("worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}})";
  const std::string unknown = error_of(job_object(R"({"model": "gpt-17", )" + megatron + "}"));
  EXPECT_EQ(unknown.rfind("spec.model: unknown model 'gpt-17': name a planner preset (", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("Llama-3-8B"), std::string::npos) << "the presets are listed: " << unknown;
  EXPECT_EQ(error_of(job_object(R"({"model": "llama-3-8b", )" + megatron + "}")), "");
  EXPECT_EQ(error_of(job_object(R"({"model": "mine", "modelSpec": {"numLayers": 2, "hidden": 32, "heads": 4, )"
                                R"("vocabSize": 9, "seqLen": 8}, )" + megatron + "}")),
            "");
  nlohmann::json no_spec = job_object();
  no_spec.erase("spec");
  EXPECT_EQ(error_of(no_spec), "spec: required");
}

// Found by the fuzz test: minGPUs of 2^63 - 1 passed, was narrowed to -1 and the job table's
// doubling search never ended. Every int field is range-checked before it is narrowed.
TEST(JobSpec, IntFieldsWiderThanInt32AreRefusedNotNarrowed) {
  EXPECT_EQ(error_of(job_object(R"({"resources": {"minGPUs": 9223372036854775807}})")),
            "spec.resources.minGPUs: must be at most 2147483647, got 9223372036854775807");
  EXPECT_EQ(error_of(job_object(R"({"globalBatchSize": 2147483648})")),
            "spec.globalBatchSize: must be at most 2147483647, got 2147483648");
  EXPECT_EQ(error_of(job_object(R"({"trainSteps": 18446744073709551615})")),
            "spec.trainSteps: must be at most 9223372036854775807");
  EXPECT_EQ(error_of(job_object(R"({"resources": {"maxGPUs": 2147483647}})")), "");
}

// Found by the fuzz test: a block that is not an object was read as absent, so `resources: -0.5`
// silently meant "any GPU type, no cap".
TEST(JobSpec, ABlockThatIsNotAnObjectIsRefusedNotDefaulted) {
  auto job = job_object();
  job["spec"]["resources"] = -0.5;
  EXPECT_EQ(error_of(job), "spec.resources: must be an object");
  job = job_object();
  job["spec"]["elasticity"] = "strict";
  EXPECT_EQ(error_of(job), "spec.elasticity: must be an object");
}
