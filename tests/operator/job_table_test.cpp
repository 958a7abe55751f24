// job_table.h: which spec fields a job's table depends on (jobs with equal keys share one
// table in the operator), and a job that is never resized gets only its admission entry.
#include <gtest/gtest.h>

#include "common/pod_plan.h"
#include "operator/job_table.h"
#include "operator_fixture.h"

namespace fo = flotilla::op;
using fo::testing::job_object;
using fo::testing::spec_of;

namespace {

flotilla::planner::ClusterSpec slow_nodes(int count, int gpus) {
  flotilla::planner::ClusterSpec c;
  for (int i = 0; i < count; ++i) c.nodes.push_back({"n" + std::to_string(i), "emu-slow", gpus, "z", "z"});
  return c;
}

}  // namespace

TEST(JobTableKey, IgnoresWhatThePlanDoesNotReadAndNamesWhatItDoes) {
  const std::string base = fo::job_table_key(spec_of(job_object()));
  // A sweep: other name, uid, seed, priority, steps, image, data and checkpoint share the key.
  nlohmann::json sweep = job_object(R"({"seed": 7, "priority": 3, "trainSteps": 5,
      "worker": {"image": "w:2", "data": "/data/other.txt"}, "checkpoint": {"path": "/other"}})");
  sweep["metadata"]["name"] = "other";
  sweep["metadata"]["uid"] = "u-2";
  sweep["metadata"]["generation"] = 9;
  EXPECT_EQ(fo::job_table_key(spec_of(sweep)), base);
  // Each field the planner or the table reads changes it.
  for (const char* change :
       {R"({"globalBatchSize": 16})", R"({"model": "tiny"})", R"({"elasticity": {"mode": "relaxed"}})",
        R"({"resources": {"maxGPUs": 4}})", R"({"resources": {"minGPUs": 2}})",
        R"({"resources": {"gpuTypes": ["emu-slow"]}})", R"({"objective": "cost"})",
        R"({"budget": {"maxUsdPerHour": 3}})",
        R"({"worker": {"kind": "megatron", "megatron": {"script": "/opt/megatron-lm/pretrain_gpt.py"}}})"})
    EXPECT_NE(fo::job_table_key(spec_of(job_object(change))), base) << change;
  // A megatron job's extra arguments decide whether its plans can launch at all.
  const std::string megatron = R"({"worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}, )";
  EXPECT_NE(fo::job_table_key(spec_of(job_object(megatron + R"("extraArgs": ["--save=/x"]}})"))),
            fo::job_table_key(spec_of(job_object(megatron + R"("extraArgs": []}})"))));
  const std::string inline_a = fo::job_table_key(spec_of(job_object(
      R"({"model": "mine", "modelSpec": {"numLayers": 4, "hidden": 64, "heads": 4, "vocabSize": 256, "seqLen": 32}, )"
      R"("worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}}})")));
  const std::string inline_b = fo::job_table_key(spec_of(job_object(
      R"({"model": "mine", "modelSpec": {"numLayers": 6, "hidden": 64, "heads": 4, "vocabSize": 256, "seqLen": 32}, )"
      R"("worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}}})")));
  EXPECT_NE(inline_a, inline_b);
}

TEST(JobTable, AJobThatIsNeverResizedGetsOnlyItsAdmissionEntry) {
  const fo::testing::World world;
  const auto capacity = slow_nodes(4, 2);
  const fo::JobTable strict = fo::build_job_table(spec_of(job_object()), capacity, world.context());
  const fo::JobTable off =
      fo::build_job_table(spec_of(job_object(R"({"elasticity": {"mode": "off"}})")), capacity, world.context());
  ASSERT_GT(strict.initial_gpus, 0) << strict.why_not;
  ASSERT_GT(strict.table.entries.size(), 1u) << "the strict job should have room to grow on 8 GPUs";
  EXPECT_EQ(off.initial_gpus, strict.initial_gpus);
  EXPECT_EQ(off.table.cap_gpus, off.initial_gpus);
  ASSERT_EQ(off.table.entries.size(), 1u);
  EXPECT_EQ(off.table.entries[0].gpus, strict.table.entries[0].gpus);
  EXPECT_EQ(off.table.entries[0].speedup, 1.0);
  EXPECT_EQ(off.table.entries[0].blocks_per_stage, strict.table.entries[0].blocks_per_stage);
}

// A megatron job whose extra arguments override a rendered flag has no plan at any size, and its
// table says why with render's line and reason code (not the planner's FitsNowhere).
TEST(JobTable, AMegatronJobNoPlanCanLaunchSaysWhy) {
  const fo::testing::World world;
  const fo::JobTable t = fo::build_job_table(
      spec_of(job_object(
          R"({"worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}, "extraArgs": ["--save=/x"]}})")),
      slow_nodes(2, 2), world.context());
  EXPECT_EQ(t.initial_gpus, 0);
  EXPECT_EQ(t.why_not_reason, "MegatronCannotRun");
  EXPECT_NE(t.why_not.find("spec.worker.extraArgs sets --save,"), std::string::npos) << t.why_not;
}

// cluster_view.h: find() through the index of a built view, and by scan on a hand-built one.
TEST(ClusterViewIndex, FindIsRightOnBuiltAndHandBuiltViews) {
  const fo::testing::World world;
  std::vector<nlohmann::json> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(
        {{"metadata", {{"name", "n" + std::to_string(i)}, {"labels", {{"nvidia.com/gpu.product", "emu-slow"}}}}},
         {"status",
          {{"allocatable", {{"nvidia.com/gpu", "2"}}}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  nlohmann::json pod = {
      {"metadata", {{"name", "p"}, {"namespace", "team"}, {"labels", {{flotilla::kJobLabel, "demo"}}}}},
      {"spec", {{"nodeName", "n2"}, {"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}}}}},
      {"status", {{"phase", "Running"}}}};
  const fo::ClusterView built = fo::build_cluster_view(nodes, {pod}, world.catalog, flotilla::kJobLabel);
  ASSERT_NE(built.find("n2"), nullptr);
  EXPECT_EQ(built.find("n2")->held(), 2);  // the pod found its node through the index
  EXPECT_EQ(built.find("n1")->held(), 0);
  EXPECT_EQ(built.find("n9"), nullptr);
  fo::ClusterView by_hand;
  by_hand.nodes = {fo::testing::node("a", 2), fo::testing::node("b", 2)};
  ASSERT_NE(by_hand.find("b"), nullptr);
  EXPECT_EQ(by_hand.find("b")->name, "b");
}

// job_plan.h: what the allocator is told a running job has left (its scale-up must repay the
// restart within it). Predicted 0.5 s a step at 1,000 tokens/s; 100 of 300 steps done.
TEST(RemainingTrainSeconds, MeasuredSpeedWhenReportedElsePredicted) {
  fo::JobPlan plan;
  plan.iteration_seconds = 0.5;
  plan.tokens_per_second = 1000;
  EXPECT_DOUBLE_EQ(*fo::remaining_train_seconds(plan, 300, {{"step", 100}}), 200 * 0.5);
  // Measured at 250 tokens/s, a quarter of the prediction: a step takes 2 s.
  EXPECT_DOUBLE_EQ(*fo::remaining_train_seconds(plan, 300, {{"step", 100}, {"tokensPerSecond", 250.0}}), 200 * 2.0);
  EXPECT_DOUBLE_EQ(*fo::remaining_train_seconds(plan, 300, {{"step", 300}}), 0);
  EXPECT_DOUBLE_EQ(*fo::remaining_train_seconds(plan, 300, nlohmann::json()), 300 * 0.5);
  plan.iteration_seconds = 0;
  EXPECT_FALSE(fo::remaining_train_seconds(plan, 300, {{"step", 100}}));
}
