// The Megatron-LM launcher template: golden commands written by hand (homogeneous,
// heterogeneous with an uneven split, TP > 1), the refusals, pods on nodes of different sizes,
// ranks on the GPU type of their stage for plans from plan_and_place(), and every rendered flag
// checked against Megatron's own argument definitions (tests/launch/megatron_flags_test.cpp).
#include "launch/megatron.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "planner/cluster.h"
#include "planner/network.h"
#include "planner/profile.h"
#include "tests/launch/megatron_cases.h"

namespace flotilla::launch {
namespace {

namespace fp = flotilla::planner;
using testcases::gpt_toy;
using testcases::llama_toy;
using testcases::stage;

// The common tail of every command with default options.
const std::string kCheckpointTail =
    " --use-distributed-optimizer --train-iters 1000 --lr 0.0003 --mock-data --ckpt-format "
    "torch_dist --dist-ckpt-optim-fully-reshardable --save /checkpoints --load /checkpoints "
    "--save-interval 1000 --exit-signal-handler";

TEST(MegatronLaunch, HomogeneousEvenSplitGolden) {
  const MegatronJob job = testcases::homogeneous_job();
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_TRUE(launch.ok()) << launch.error();
  ASSERT_EQ(launch->pods.size(), 2u);
  EXPECT_EQ(launch->layout, "");
  EXPECT_TRUE(launch->notes.empty());
  const std::string model =
      " pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2"
      " --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --ffn-hidden-size 4096"
      " --seq-length 2048 --max-position-embeddings 2048 --tokenizer-type NullTokenizer"
      " --vocab-size 50257 --micro-batch-size 2 --global-batch-size 64 --fp16";
  EXPECT_EQ(launch->pods[0].command(),
            "torchrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --rdzv-backend static "
            "--master-addr n0 --master-port 29500" + model + kCheckpointTail);
  EXPECT_EQ(launch->pods[1].command(),
            "torchrun --nnodes 2 --node-rank 1 --nproc-per-node 4 --rdzv-backend static "
            "--master-addr n0 --master-port 29500" + model + kCheckpointTail);
  EXPECT_EQ(launch->pods[0].node, "n0");
  EXPECT_EQ(launch->pods[1].node, "n1");
  EXPECT_EQ(launch->pods[1].first_global_rank, 4);
}

TEST(MegatronLaunch, HeterogeneousUnevenSplitGolden) {
  // Stage 0: embedding + layers 1-5 on A100s; stage 1: layers 6-8 + head on V100s.
  const MegatronJob job = testcases::heterogeneous_job();
  MegatronOptions options;
  options.master_addr = "trainer-0.flotilla";
  options.master_port = 6000;
  options.checkpoint_path = "/ckpt/job 1";
  options.data_path = {"/data/a_text_document"};
  options.train_steps = 500;
  options.save_interval_steps = 100;
  auto launch = render_megatron(job, options);
  ASSERT_TRUE(launch.ok()) << launch.error();
  EXPECT_EQ(launch->layout, "Et*5|t*3L");
  ASSERT_EQ(launch->pods.size(), 2u);
  EXPECT_EQ(launch->pods[0].node, "a100-0");
  EXPECT_EQ(launch->pods[1].node, "v100-0");
  const std::string megatron =
      " pretrain_gpt.py --tensor-model-parallel-size 1 --pipeline-model-parallel-size 2"
      " --pipeline-model-parallel-layout 'Et*5|t*3L'"
      " --num-layers 8 --hidden-size 1024 --num-attention-heads 16 --ffn-hidden-size 4096"
      " --seq-length 2048 --max-position-embeddings 2048 --tokenizer-type NullTokenizer"
      " --vocab-size 50257 --micro-batch-size 1 --global-batch-size 32 --bf16"
      " --use-distributed-optimizer --train-iters 500 --lr 0.0003"
      " --data-path /data/a_text_document --ckpt-format torch_dist"
      " --dist-ckpt-optim-fully-reshardable --save '/ckpt/job 1' --load '/ckpt/job 1'"
      " --save-interval 100 --exit-signal-handler";
  EXPECT_EQ(launch->pods[0].command(),
            "torchrun --nnodes 2 --node-rank 0 --nproc-per-node 2 --rdzv-backend static "
            "--master-addr trainer-0.flotilla --master-port 6000" + megatron);
  EXPECT_EQ(launch->pods[1].command(),
            "torchrun --nnodes 2 --node-rank 1 --nproc-per-node 2 --rdzv-backend static "
            "--master-addr trainer-0.flotilla --master-port 6000" + megatron);
}

TEST(MegatronLaunch, TensorParallelGoldenSetsCudaDeviceMaxConnections) {
  const MegatronJob job = testcases::tensor_parallel_job();
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_TRUE(launch.ok()) << launch.error();
  ASSERT_EQ(launch->pods.size(), 1u);
  EXPECT_EQ(launch->pods[0].command(),
            "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nnodes 1 --node-rank 0 --nproc-per-node 4 "
            "--rdzv-backend static --master-addr g0 --master-port 29500 pretrain_gpt.py "
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --num-layers 4 "
            "--hidden-size 2048 --num-attention-heads 16 --ffn-hidden-size 5632 --seq-length 4096 "
            "--max-position-embeddings 4096 --group-query-attention --num-query-groups 4 --swiglu "
            "--normalization RMSNorm --position-embedding-type rope --disable-bias-linear "
            "--untie-embeddings-and-output-weights --tokenizer-type NullTokenizer --vocab-size 32000 "
            "--micro-batch-size 1 --global-batch-size 16 --bf16 --recompute-granularity selective "
            "--sequence-parallel" + kCheckpointTail);
}

TEST(MegatronLaunch, NoCudaDeviceMaxConnectionsAtTpOne) {
  auto launch = render_megatron(testcases::homogeneous_job(), MegatronOptions{});
  ASSERT_TRUE(launch.ok());
  for (const PodLaunch& pod : launch->pods) EXPECT_TRUE(pod.env.empty());
}

TEST(MegatronLaunch, RefusesOneTpPerStage) {
  MegatronJob job = testcases::heterogeneous_job();
  job.stages[1].tp = 2;
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_FALSE(launch.ok());
  EXPECT_EQ(launch.error(),
            "Megatron-LM runs one tensor-parallel size for all stages, but stage 0 has TP 1 and "
            "stage 1 has TP 2 (plan with megatron_constraints(): one TP for all stages)");
}

TEST(MegatronLaunch, RefusesDifferentMicroBatchSizesAndOtherInexpressiblePlans) {
  MegatronJob job = testcases::heterogeneous_job();
  job.stages[1].micro_batch_size = 2;
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_FALSE(launch.ok());
  EXPECT_EQ(launch.error(),
            "Megatron-LM runs one micro-batch size for all stages, but stage 0 has 1 and stage 1 has 2");

  job = testcases::heterogeneous_job();
  job.stages[1].replica_nodes.pop_back();
  EXPECT_NE(render_megatron(job, {}).error().find("one data-parallel size"), std::string::npos);

  job = testcases::heterogeneous_job();
  job.training.zero_stage = 3;
  EXPECT_NE(render_megatron(job, {}).error().find("ZeRO-3"), std::string::npos);

  job = testcases::heterogeneous_job();
  job.model = *fp::find_preset("opt-350m");
  EXPECT_NE(render_megatron(job, {}).error().find("no flag for that projection"), std::string::npos);

  job = testcases::tensor_parallel_job();
  job.stages[0].tp = 8;  // 4 key/value heads
  EXPECT_NE(render_megatron(job, {}).error().find("does not divide"), std::string::npos);

  job = testcases::homogeneous_job();
  job.global_batch_size = 60;  // not a multiple of 2 x 4
  EXPECT_NE(render_megatron(job, {}).error().find("not a multiple"), std::string::npos);

  // Every refusal is one line.
  for (const std::string& line : {render_megatron(job, {}).error()})
    EXPECT_EQ(line.find('\n'), std::string::npos);
}

// torchrun needs one --nproc-per-node: a node with 4 of the job's GPUs beside nodes with 2
// runs two pods of 2 GPUs.
TEST(MegatronLaunch, NodesOfDifferentSizesAreSplitIntoEqualPods) {
  MegatronJob job;
  job.model = gpt_toy();
  job.global_batch_size = 8;
  job.stages = {stage(0, 5, 2, 1, "A100-40", {"big", "big"}),
                stage(5, 10, 2, 1, "V100-16", {"small-1", "small-2"})};
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_TRUE(launch.ok()) << launch.error();
  EXPECT_EQ(launch->nproc_per_node, 2);
  ASSERT_EQ(launch->pods.size(), 4u);
  const std::vector<std::string> nodes = {"big", "big", "small-1", "small-2"};
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    EXPECT_EQ(launch->pods[r].node, nodes[r]);
    EXPECT_EQ(launch->pods[r].node_rank, static_cast<int>(r));
    EXPECT_NE(launch->pods[r].command().find("--nnodes 4 --node-rank " + std::to_string(r) +
                                             " --nproc-per-node 2 "),
              std::string::npos);
  }
  ASSERT_EQ(launch->notes.size(), 1u);
  EXPECT_EQ(launch->notes[0],
            "node big runs 2 pods of 2 GPUs (torchrun needs one --nproc-per-node for all pods)");
}

// Replicas of a stage are grouped by node so that a node's ranks are contiguous.
TEST(MegatronLaunch, ReplicasOfAStageAreGroupedByNode) {
  MegatronJob job;
  job.model = gpt_toy();
  job.global_batch_size = 8;
  job.stages = {stage(0, 10, 1, 1, "A100-40", {"a", "b", "a", "b"})};
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_TRUE(launch.ok()) << launch.error();
  ASSERT_EQ(launch->pods.size(), 2u);
  EXPECT_EQ(launch->nproc_per_node, 2);
  EXPECT_EQ(launch->pods[0].node, "a");
  EXPECT_EQ(launch->pods[1].node, "b");
}

TEST(MegatronLaunch, LayoutStages) {
  EXPECT_EQ(layout_stage(0, 1, 8), "E");
  EXPECT_EQ(layout_stage(0, 2, 8), "Et");
  EXPECT_EQ(layout_stage(1, 4, 8), "t*3");
  EXPECT_EQ(layout_stage(9, 10, 8), "L");
  EXPECT_EQ(layout_stage(0, 10, 8), "Et*8L");
  // An embedding-only first stage still renders (Megatron's layout allows layer-less stages).
  MegatronJob job;
  job.model = gpt_toy();
  job.global_batch_size = 4;
  job.stages = {stage(0, 1, 1, 1, "A100-40", {"n0"}), stage(1, 10, 1, 1, "A100-40", {"n0"})};
  auto launch = render_megatron(job, MegatronOptions{});
  ASSERT_TRUE(launch.ok()) << launch.error();
  EXPECT_EQ(launch->layout, "E|t*8L");
}

TEST(MegatronLaunch, ShellQuote) {
  EXPECT_EQ(shell_quote("/data/x_y-1.bin"), "/data/x_y-1.bin");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("E|t*2"), "'E|t*2'");
}

TEST(MegatronLaunch, JobFromPlanAndPlacement) {
  fp::Plan plan;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 8;
  plan.stages.resize(2);
  plan.stages[0] = {0, 6, 1, {{"A100-40", "z", 0}, {"A100-40", "z", 0}}};
  plan.stages[1] = {6, 10, 1, {{"V100-16", "z", 0}, {"V100-16", "z", 0}}};
  std::vector<fp::GroupPlacement> placement = {
      {1, 1, "v1", 1}, {0, 0, "a0", 1}, {0, 1, "a0", 1}, {1, 0, "v0", 1}};
  auto job = megatron_job(plan, placement, gpt_toy());
  ASSERT_TRUE(job.ok()) << job.error();
  EXPECT_EQ(job->stages[1].replica_nodes, (std::vector<std::string>{"v0", "v1"}));
  EXPECT_EQ(job->stages[0].gpu_type, "A100-40");

  placement[0].gpus = 2;
  EXPECT_EQ(megatron_job(plan, placement, gpt_toy()).error(),
            "placement gives stage 1 replica 1 2 GPUs but the stage's TP is 1");
  placement.pop_back();
  placement[0].gpus = 1;
  EXPECT_EQ(megatron_job(plan, placement, gpt_toy()).error(), "placement has no node for stage 1 replica 0");
}

// From plan_and_place() on the example cluster (A100 nodes of 8, 8, 4; V100 nodes of 4), for
// several models: every rank runs on a node of its stage's GPU type, the world size is the
// plan's, and each node's pods add up to the GPUs the placement gives it.
TEST(MegatronLaunch, PlansFromPlanAndPlacePutEveryRankOnItsStagesGpuType) {
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  fp::ComputeModel compute(nullptr);
  fp::NetworkModel network = fp::default_network_model();
  fp::EvalContext context{&catalog, &compute, &network};
  fp::ClusterSpec cluster;
  std::map<std::string, std::string> type_of;
  auto add = [&](std::string name, std::string gpu, int gpus) {
    type_of[name] = gpu;
    cluster.nodes.push_back({name, gpu, gpus, "z", "z"});
  };
  add("a100-0", "A100-40", 8);
  add("a100-1", "A100-40", 8);
  add("a100-2", "A100-40", 4);
  for (int i = 0; i < 6; ++i) add("v100-" + std::to_string(i), "V100-16", 4);
  int rendered = 0;
  for (const char* name : {"gpt-neo-2.7b", "llama-2-7b", "llama-3-8b"}) {
    fp::PlaceRequest request;
    request.model_name = name;
    request.global_batch_size = 256;
    request.training.flash_attention = true;
    request.worker = fp::megatron_constraints();
    const fp::PlaceResult placed = fp::plan_and_place(request, cluster, context);
    if (!placed.ok()) continue;
    auto job = megatron_job(placed);
    ASSERT_TRUE(job.ok()) << name << ": " << job.error();
    auto launch = render_megatron(*job, MegatronOptions{});
    ASSERT_TRUE(launch.ok()) << name << ": " << launch.error();
    ++rendered;
    const fp::Plan& plan = placed.plan().plan;
    const int per_stage = launch->tp * launch->dp;
    EXPECT_EQ(launch->nnodes * launch->nproc_per_node, plan.num_gpus()) << name;
    std::map<std::string, int> gpus_by_node;
    for (const PodLaunch& pod : launch->pods) {
      gpus_by_node[pod.node] += pod.gpus;
      EXPECT_EQ(pod.gpu_type, type_of[pod.node]) << name;
      for (int r = pod.first_global_rank; r < pod.first_global_rank + pod.gpus; ++r)
        EXPECT_EQ(type_of[pod.node], plan.stages[r / per_stage].replicas.front().gpu_type)
            << name << " rank " << r;
    }
    EXPECT_EQ(gpus_by_node, placed.gpus_by_node) << name;
  }
  EXPECT_GE(rendered, 2);
}

}  // namespace
}  // namespace flotilla::launch
