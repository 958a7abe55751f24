// The worker flags the sidecar renders from a PodPlan parse back, in the real worker's parser,
// to the job the plan describes.
#include <gtest/gtest.h>

#include "tests/common/sample_pod_plan.h"
#include "trainer-sidecar/worker_args.h"
#include "worker/runtime/job_options.h"

namespace flotilla::sidecar {
namespace {

PodPlan sample_plan() { return testing::sample_pod_plan(); }

TEST(SidecarWorkerArgs, RoundTripsThroughTheWorkersParser) {
  const PodPlan plan = sample_plan();
  auto args = worker_rank_args(plan, {"/w/progress.jsonl", 7.5});
  ASSERT_EQ(args.front(), "rank");
  auto parsed = worker::parse_job_options({args.begin() + 1, args.end()});
  ASSERT_TRUE(std::holds_alternative<worker::JobOptions>(parsed)) << std::get<std::string>(parsed);
  const auto& o = std::get<worker::JobOptions>(parsed);
  EXPECT_EQ(o.model_name, "small");
  EXPECT_EQ(o.world_size, 6);
  EXPECT_EQ(o.pp, 3);
  EXPECT_EQ(o.dp, 2);
  EXPECT_EQ(o.partition, "0:1,1:4,4:6");
  EXPECT_EQ(o.geometry.global_batch, 8);
  EXPECT_EQ(o.geometry.micro_batch, 2);
  EXPECT_EQ(o.geometry.virtual_shards, 4);
  EXPECT_EQ(o.train.seed, 77u);
  EXPECT_EQ(o.steps, 12);
  EXPECT_EQ(o.data_path, "/data/corpus.txt");
  EXPECT_EQ(o.checkpoint_dir, "/ck");
  EXPECT_EQ(o.checkpoint_every, 5);
  EXPECT_EQ(o.loss_log, "/ck/loss.txt");
  EXPECT_EQ(o.progress, "/w/progress.jsonl");
  EXPECT_DOUBLE_EQ(o.connect_timeout_s, 7.5);
}

TEST(SidecarWorkerArgs, OptionalFlagsAreLeftOutWhenEmpty) {
  PodPlan plan = sample_plan();
  plan.partition.clear();
  plan.loss_log.clear();
  auto args = worker_rank_args(plan, {});
  for (const char* flag : {"--partition", "--loss-log", "--progress", "--connect-timeout"})
    EXPECT_EQ(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  auto parsed = worker::parse_job_options({args.begin() + 1, args.end()});
  EXPECT_TRUE(std::holds_alternative<worker::JobOptions>(parsed));
}

TEST(SidecarWorkerArgs, RankEnvironmentNamesTheGlobalRankAndLocalIndex) {
  const PodPlan plan = sample_plan();
  auto env = rank_env(plan, 1, "10.0.0.7", 29500);
  EXPECT_EQ(env.at("RANK"), "4");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "6");
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.7");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
}

// A megatron pod of PP2 · DP2 · TP2 (world 8) holding ranks 4..7: one torchrun agent, node
// rank 4 / 4 = 1 of 8 / 4 = 2, four local ranks, the epoch's rendezvous, then the script and
// its flags as the operator rendered them.
TEST(SidecarMegatronArgs, TorchrunTakesItsCountsFromTheRanksAndItsMasterFromTheRendezvous) {
  PodPlan plan = sample_plan();
  plan.worker_kind = "megatron";
  plan.world_size = 8;
  plan.pp = 2;
  plan.dp = 2;
  plan.tp = 2;
  plan.ranks = {4, 5, 6, 7};
  plan.megatron_args = {"/opt/megatron-lm/pretrain_gpt.py", "--tensor-model-parallel-size", "2", "--seq-length", "32"};
  EXPECT_EQ(megatron_pod_argv(plan, "10.0.0.7", 41234),
            (std::vector<std::string>{"torchrun", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "4",
                                      "--rdzv-backend", "static", "--master-addr", "10.0.0.7", "--master-port", "41234",
                                      "/opt/megatron-lm/pretrain_gpt.py", "--tensor-model-parallel-size", "2",
                                      "--seq-length", "32"}));
  EXPECT_EQ(megatron_pod_env(plan), (std::map<std::string, std::string>{{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}));
  EXPECT_EQ(megatron_seq_length(plan), 32);
  plan.tp = 1;
  EXPECT_TRUE(megatron_pod_env(plan).empty());
  plan.megatron_args.resize(3);
  EXPECT_EQ(megatron_seq_length(plan), 0);
}

}  // namespace
}  // namespace flotilla::sidecar
