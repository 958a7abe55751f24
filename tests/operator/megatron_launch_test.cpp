// Worker kind megatron in the operator: a hand-placed plan becomes Megatron's pods (one torchrun
// agent each), the flags every pod runs, and each pod's flotilla.io/plan; plans Megatron-LM
// cannot express, and extra arguments that would override the plan, fail in one line.
// Every expectation below is derived by hand from launch/megatron.h's contract (rank order
// tp-dp-pp, node rank r holds ranks [r·g, (r+1)·g)), not from a previous run.
#include <gtest/gtest.h>

#include "operator/job_plan.h"
#include "operator/megatron_launch.h"
#include "operator_fixture.h"

namespace fo = flotilla::op;
namespace fp = flotilla::planner;
using fo::testing::job_object;
using fo::testing::spec_of;

namespace {

constexpr const char* kMegatronJob = R"({
    "model": "mine", "modelSpec": {"numLayers": 4, "hidden": 64, "heads": 4, "vocabSize": 256, "seqLen": 32},
    "worker": {"kind": "megatron", "data": "/data/corpus_text_document", "extraArgs": ["--log-interval", "1"],
               "megatron": {"script": "/opt/megatron-lm/pretrain_gpt.py"}}})";

fp::Stage stage(int first_block, int last_block, int tp, int replicas) {
  fp::Stage s;
  s.first_block = first_block;
  s.last_block = last_block;
  s.tp = tp;
  s.replicas.assign(static_cast<std::size_t>(replicas), fp::Replica{"emu-slow", "z", 0, 0});
  return s;
}

// PP2 · DP2 · TP2 of the 4-layer model: stage 0 = embedding + 3 layers, stage 1 = 1 layer + head;
// replica r of stage s on nodes[s][r].
fp::PlaceResult placed(const fo::JobSpec& spec, const std::vector<std::vector<std::string>>& nodes, int stage1_tp = 2) {
  fp::PlaceResult result;
  result.model = *fo::planner_model(spec);
  fp::Plan plan;
  plan.stages = {stage(0, 4, 2, 2), stage(4, 6, stage1_tp, 2)};
  plan.micro_batch_size = 1;
  plan.global_batch_size = spec.global_batch_size;
  result.search.plans.push_back({plan, {}});
  for (int s = 0; s < 2; ++s)
    for (int r = 0; r < 2; ++r) result.placement.push_back({s, r, nodes[s][r], plan.stages[s].tp});
  return result;
}

std::vector<std::string> expected_megatron_args() {
  // clang-format off: flag, value pairs
  return {"/opt/megatron-lm/pretrain_gpt.py",
          "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
          "--pipeline-model-parallel-layout", "Et*3|tL",  // 3 layers + 1 layer: not Megatron's even split
          "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--ffn-hidden-size", "256",
          "--seq-length", "32", "--max-position-embeddings", "32", "--untie-embeddings-and-output-weights",
          "--tokenizer-type", "NullTokenizer", "--vocab-size", "256",
          "--micro-batch-size", "1", "--global-batch-size", "8", "--fp16", "--use-distributed-optimizer",
          "--train-iters", "100", "--lr", "0.0003", "--data-path", "/data/corpus_text_document",
          "--ckpt-format", "torch_dist", "--dist-ckpt-optim-fully-reshardable", "--save", "/ckpt", "--load", "/ckpt",
          "--save-interval", "10", "--exit-signal-handler",
          "--log-interval", "1"};  // spec.worker.extraArgs, last
  // clang-format on
}

}  // namespace

TEST(MegatronPodPlan, TwoNodesOfFourGpusRunOneTorchrunAgentEach) {
  const fo::JobSpec spec = spec_of(job_object(kMegatronJob));
  // Stage 0 (ranks 0..3) on n-a, stage 1 (ranks 4..7) on n-b: blocks of 4 ranks stay on one node.
  const fo::PlanOutcome out = fo::plan_from_placed(spec, placed(spec, {{"n-a", "n-a"}, {"n-b", "n-b"}}), {}, 3);
  ASSERT_TRUE(out.plan) << out.reason << ": " << out.message;
  const fo::JobPlan& plan = *out.plan;
  EXPECT_EQ(plan.summary(), "PP2\u00b7DP2\u00b7TP2");
  ASSERT_EQ(plan.pods.size(), 2u);
  EXPECT_EQ(plan.pods[0].name, "demo-n-a-g4");
  EXPECT_EQ(plan.pods[0].node, "n-a");
  EXPECT_EQ(plan.pods[0].gpus, 4);
  EXPECT_EQ(plan.pods[0].ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.pods[1].name, "demo-n-b-g4");
  EXPECT_EQ(plan.pods[1].ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(plan.rendezvous_pod, "demo-n-a-g4");
  EXPECT_EQ(plan.stages[0].pods, std::vector<std::string>{"demo-n-a-g4"});
  EXPECT_EQ(plan.stages[1].pods, std::vector<std::string>{"demo-n-b-g4"});
  EXPECT_EQ(plan.megatron_args, expected_megatron_args());

  // The status round-trips the flags, and each pod's plan carries them with its own ranks.
  const auto back = fo::JobPlan::from_status(plan.to_status());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->megatron_args, plan.megatron_args);
  const flotilla::PodPlan pod = fo::pod_plan_for(spec, *back, back->pods[1], 3);
  EXPECT_EQ(pod.worker_kind, "megatron");
  EXPECT_EQ(pod.world_size, 8);
  EXPECT_EQ(pod.tp, 2);
  EXPECT_EQ(pod.ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(pod.megatron_args, expected_megatron_args());
  auto parsed = flotilla::parse_pod_plan(flotilla::encode_pod_plan(pod));
  ASSERT_TRUE(std::holds_alternative<flotilla::PodPlan>(parsed)) << std::get<std::string>(parsed);
}

TEST(MegatronPodPlan, ANodeHoldingTwoBlocksOfRanksRunsTwoNamedPods) {
  const fo::JobSpec spec = spec_of(job_object(kMegatronJob));
  // Nodes numbered by first appearance, stage-major then replica: n-b, n-a, n-c. Stage 0's
  // replicas (n-b, n-a) give ranks 0,1 to n-b and 2,3 to n-a; stage 1's (n-c, n-a), sorted by
  // that number, give 4,5 to n-a and 6,7 to n-c. No block of 4 ranks is on one node, so g = TP
  // = 2: node rank 0 = n-b, 1 = n-a, 2 = n-a again (its second pod), 3 = n-c.
  const fo::PlanOutcome out = fo::plan_from_placed(spec, placed(spec, {{"n-b", "n-a"}, {"n-c", "n-a"}}), {}, 1);
  ASSERT_TRUE(out.plan) << out.message;
  const fo::JobPlan& plan = *out.plan;
  ASSERT_EQ(plan.pods.size(), 4u);
  const std::vector<std::string> names = {"demo-n-b-g2", "demo-n-a-g2", "demo-n-a-g2-1", "demo-n-c-g2"};
  for (std::size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.pods[r].name, names[r]);
    EXPECT_EQ(plan.pods[r].gpus, 2);
    EXPECT_EQ(plan.pods[r].ranks, (std::vector<int>{static_cast<int>(2 * r), static_cast<int>(2 * r + 1)}));
  }
  EXPECT_EQ(plan.stages[0].pods, (std::vector<std::string>{"demo-n-b-g2", "demo-n-a-g2"}));
  EXPECT_EQ(plan.stages[1].pods, (std::vector<std::string>{"demo-n-a-g2-1", "demo-n-c-g2"}));
  EXPECT_EQ(plan.rendezvous_pod, "demo-n-b-g2");
}

TEST(MegatronPodPlan, WorkerDataIsOnePrefixOrABlendAndEmptyIsMockData) {
  auto data_flags = [](const std::string& data) {
    fo::JobSpec spec = spec_of(job_object(kMegatronJob));
    spec.worker_data = data;
    return fo::megatron_options(spec).data_path;
  };
  EXPECT_EQ(data_flags("/d/a_text_document"), std::vector<std::string>{"/d/a_text_document"});
  EXPECT_EQ(data_flags(" 0.3 /d/a\t0.7  /d/b "), (std::vector<std::string>{"0.3", "/d/a", "0.7", "/d/b"}));
  EXPECT_TRUE(data_flags("").empty());  // render_megatron() then passes --mock-data
}

TEST(MegatronPodPlan, APlanMegatronCannotExpressIsRefusedWithRendersLine) {
  const fo::JobSpec spec = spec_of(job_object(kMegatronJob));
  const fo::PlanOutcome out =
      fo::plan_from_placed(spec, placed(spec, {{"n-a", "n-a"}, {"n-b", "n-b"}}, /*stage1_tp=*/1), {}, 1);
  EXPECT_FALSE(out.plan);
  EXPECT_EQ(out.reason, "MegatronCannotRun");
  EXPECT_EQ(out.message,
            "Megatron-LM cannot run the chosen plan: Megatron-LM runs one tensor-parallel size for all stages, but "
            "stage 0 has TP 2 and stage 1 has TP 1 (plan with megatron_constraints(): one TP for all stages)");
}

TEST(MegatronPodPlan, ExtraArgumentsThatOverrideThePlanAreRefused) {
  for (const auto& [extra, flag] : std::vector<std::pair<std::string, std::string>>{
           {R"(["--save=/elsewhere"])", "--save"},
           {R"(["--tensor-model-parallel-size", "4"])", "--tensor-model-parallel-size"},
           {R"(["--context-parallel-size", "2"])", "--context-parallel-size"}}) {
    const fo::JobSpec spec = spec_of(job_object(R"({"worker": {"kind": "megatron", "extraArgs": )" + extra +
                                                R"(, "megatron": {"script": "/m/pretrain_gpt.py"}}})"));
    const fo::PlanOutcome out = fo::plan_from_placed(spec, placed(spec, {{"n-a", "n-a"}, {"n-b", "n-b"}}), {}, 1);
    EXPECT_FALSE(out.plan) << extra;
    EXPECT_EQ(out.reason, "MegatronCannotRun");
    EXPECT_NE(out.message.find("spec.worker.extraArgs sets " + flag + ","), std::string::npos) << out.message;
  }
}

TEST(MegatronSpec, TheScriptIsRequiredAndAbsoluteAndTheRestDefaults) {
  auto error_of = [](const std::string& extra) {
    auto r = fo::parse_job_spec(job_object(extra));
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "";
  };
  EXPECT_EQ(error_of(R"({"worker": {"kind": "megatron"}})"), "spec.worker.megatron.script: required");
  EXPECT_EQ(error_of(R"({"worker": {"kind": "megatron", "megatron": {"script": "pretrain_gpt.py"}}})"),
            "spec.worker.megatron.script: must be the absolute path of Megatron-LM's pretrain_gpt.py in the image, "
            "got 'pretrain_gpt.py'");
  EXPECT_EQ(error_of(R"({"worker": {"kind": "megatron", "megatron": {"script": "/m/p.py", "learningRate": 0}}})"),
            "spec.worker.megatron.learningRate: must be above 0");
  const fo::JobSpec s = spec_of(job_object(R"({"worker": {"kind": "megatron", "megatron": {"script": "/m/p.py"}}})"));
  EXPECT_EQ(s.megatron.tokenizer_type, "NullTokenizer");
  EXPECT_EQ(s.megatron.learning_rate, 3.0e-4);
  // Kind flotilla never reads the block.
  EXPECT_EQ(error_of(R"({"worker": {"megatron": {"script": 5}}})"), "");
}
