// `flotilla plan evaluate` as a real process: the JSON contract, exit codes, one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/data_path.h"

namespace fs = std::filesystem;

namespace {

struct CliRun {
  int rc = -1;
  std::string out;
  std::string err;
};

CliRun run_cli(const std::string& args) {
  const fs::path tmp = fs::temp_directory_path() / ("flotilla_eval_" + std::to_string(::getpid()));
  const std::string cmd = std::string(FLOTILLA_BINARY_DIR) + "/cli/flotilla plan evaluate " + args + " > " +
                          tmp.string() + ".out 2> " + tmp.string() + ".err";
  CliRun r;
  const int status = std::system(cmd.c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream o(tmp.string() + ".out"), e(tmp.string() + ".err");
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  fs::remove(tmp.string() + ".out");
  fs::remove(tmp.string() + ".err");
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / (name + std::to_string(::getpid()) + ".json");
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST(PlanEvaluateCli, JsonContractOnAMeasuredRun) {
  auto root = flotilla::data_path("sailor");
  if (!root) GTEST_SKIP() << flotilla::data_missing_message("sailor");
  const std::string d = root->string();
  const CliRun r = run_cli("--sailor-plan " + d + "/validation/clariden/OPT-350/N8/plan_config_N8_D2.json --training-config " +
                    d + "/configs/training_config_opt_350.json --profiles " + d + "/profiles --network " + d +
                    "/network --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // Independent numbers: the run's measured max_mem (25.77 GB) and iteration time (2.483 s).
  EXPECT_NEAR(j["peak_bytes_max"].get<double>() / 25768755200.0, 1.0, 0.08);
  EXPECT_NEAR(j["iter_seconds"].get<double>() / 2.48342, 1.0, 0.10);
  EXPECT_TRUE(j["feasible"].get<bool>());
  ASSERT_EQ(j["ranks"].size(), 32u);  // 4 stages x 2 replicas x TP 4: every rank reported
  std::int64_t max_rank = 0;
  for (const auto& rank : j["ranks"]) max_rank = std::max(max_rank, rank["peak_bytes"].get<std::int64_t>());
  EXPECT_EQ(max_rank, j["peak_bytes_max"].get<std::int64_t>());
  EXPECT_EQ(j["stages"].size(), 4u);
}

TEST(PlanEvaluateCli, BadInputGetsOneLineAndNonZeroExit) {
  const std::string good_plan = R"({"pipeline_list":[{"num_stages":1,"layers_per_stage":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]],
    "tmp_per_stage":[[[[["A100-40",4,"us-central1-a"]],4]]],"dp":[1]}],"mbs":1,"gbs":8})";
  std::string unknown = good_plan;
  unknown.replace(unknown.find("A100-40"), 7, "B999-1");
  std::string negative = good_plan;
  negative.replace(negative.find("\"mbs\":1"), 7, "\"mbs\":-4");
  // Integers beyond int used to wrap: gbs 5e9 ran as 705032704, TP 3e9 printed "got -1294967296".
  std::string huge_gbs = good_plan;
  huge_gbs.replace(huge_gbs.find("\"gbs\":8"), 7, "\"gbs\":5000000000");
  std::string huge_tp = good_plan;
  huge_tp.replace(huge_tp.find("]],4]"), 5, "]],3000000000]");
  const std::array<std::string, 9> cases = {
      "--sailor-plan " + write_temp("ok", good_plan) + " --model opt-350m --framework pytorch-eager",
      "--sailor-plan /no/such/file.json --model opt-350m",
      "--sailor-plan " + write_temp("bad", "{\"pipeline_list\": [") + " --model opt-350m",
      "--sailor-plan " + write_temp("unk", unknown) + " --model opt-350m",
      "--sailor-plan " + write_temp("neg", negative) + " --model opt-350m",
      "--sailor-plan " + write_temp("ok", good_plan) + " --model no-such-model",
      "--sailor-plan " + write_temp("gbs", huge_gbs) + " --model opt-350m",
      "--sailor-plan " + write_temp("tp", huge_tp) + " --model opt-350m",
      "--sailor-plan " + write_temp("ok", good_plan) + " --training-config " + fs::temp_directory_path().string(),
  };
  for (const std::string& c : cases) {
    const CliRun r = run_cli(c);
    EXPECT_EQ(r.rc, 2) << c << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << c << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c;
  }
  EXPECT_NE(run_cli("--sailor-plan " + write_temp("tp", huge_tp) + " --model opt-350m").err.find("got 3000000000"),
            std::string::npos);
  EXPECT_NE(run_cli("--sailor-plan " + write_temp("ok", good_plan) + " --training-config " +
                    fs::temp_directory_path().string())
                .err.find("is a directory"),
            std::string::npos);
  const CliRun ok = run_cli("--sailor-plan " + write_temp("ok", good_plan) + " --model opt-350m --json");
  EXPECT_EQ(ok.rc, 0) << ok.err;
}

// A layer map that misses or repeats a block names the blocks as the plan lists them
// (inclusive): OPT-350M has 26 blocks, 0..25.
TEST(PlanEvaluateCli, LayerMapGapsAndOverlapsNameInclusiveBlocks) {
  const std::string tmp = R"("tmp_per_stage":[[[[["A100-40",4,"z"]],4]],[[[["A100-40",4,"z"]],4]]],"dp":[1,1]}],"mbs":1,"gbs":8})";
  const std::string gap = R"({"pipeline_list":[{"num_stages":2,"layers_per_stage":[[0,1,2],[3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24]],)" + tmp;
  const std::string overlap = R"({"pipeline_list":[{"num_stages":2,"layers_per_stage":[[0,1,2],[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]],)" + tmp;
  CliRun r = run_cli("--sailor-plan " + write_temp("gap", gap) + " --model opt-350m");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("stages cover blocks 0..24 but the model has 26 blocks, 0..25"), std::string::npos) << r.err;
  r = run_cli("--sailor-plan " + write_temp("overlap", overlap) + " --model opt-350m");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("stage 1 starts at block 2 but must start at block 3, right after the previous "
                       "stage's last block 2"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

// OPT-350M as one stage of TP 4 on a GH200 node, mbs 1 (one micro-batch in flight).
constexpr const char* kOpt350OneStageTp4 =
    R"({"pipeline_list":[{"num_stages":1,"layers_per_stage":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25]],
    "tmp_per_stage":[[[[["GH-96",4,"us-central1-a"]],4]]],"dp":[1]}],"mbs":1,"gbs":8})";

// --framework aceso-op-level: hand-counted difference against fused Megatron for OPT-350M,
// TP 4, mbs 1, one stage (one micro-batch in flight): per layer 226,492,416 B (op-level, fp32
// softmax: 20 sbh + 11 a s^2 / t) - 117,440,512 B (Korthikanti: 16 sbh + 5 a s^2 / t), times 24
// layers, and the head's logits at 4 B instead of 12 B per (s x V/t) element; all dynamic bytes
// carry the 4.52 % allocator term (fitted on Clariden).
TEST(PlanEvaluateCli, FrameworkOptionChangesActivations) {
  const std::string file = write_temp("fw", kOpt350OneStageTp4);
  const CliRun fused = run_cli("--sailor-plan " + file + " --model opt-350m --json");
  const CliRun op_level = run_cli("--sailor-plan " + file + " --model opt-350m --framework aceso-op-level --json");
  ASSERT_EQ(fused.rc, 0) << fused.err;
  ASSERT_EQ(op_level.rc, 0) << op_level.err;
  const double diff = nlohmann::json::parse(op_level.out)["peak_bytes_max"].get<double>() -
                      nlohmann::json::parse(fused.out)["peak_bytes_max"].get<double>();
  const double expected = (24.0 * (226492416.0 - 117440512.0) + (4.0 - 12.0) * 2048 * 50272 / 4) * 1.0452;
  EXPECT_NEAR(diff / expected, 1.0, 0.01);
}

// Sailor's plans ran without FlashAttention: materialized is the default; --attention flash
// drops 24 layers x (5 B x 16 x 2048^2 / 4 scores - 4 B x 16 x 2048 / 4 logsumexp), + 3.5 %.
TEST(PlanEvaluateCli, AttentionDefaultsToMaterialized) {
  const std::string file = write_temp("attn", kOpt350OneStageTp4);
  const CliRun plain = run_cli("--sailor-plan " + file + " --model opt-350m --json");
  const CliRun materialized = run_cli("--sailor-plan " + file + " --model opt-350m --attention materialized --json");
  const CliRun flash = run_cli("--sailor-plan " + file + " --model opt-350m --attention flash --json");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(flash.rc, 0) << flash.err;
  const auto peak = [](const CliRun& r) { return nlohmann::json::parse(r.out)["peak_bytes_max"].get<double>(); };
  EXPECT_EQ(nlohmann::json::parse(plain.out)["attention"], "materialized");
  EXPECT_EQ(peak(plain), peak(materialized));
  // Flash drops 5 B per score and adds the fp32 logsumexp, per layer; x (1 + the allocator fraction, 0.0452, fitted on Clariden).
  const double expected = 24.0 * (5.0 * 16 * 2048 * 2048 / 4 - 4.0 * 16 * 2048 / 4) * 1.0452;
  EXPECT_NEAR((peak(plain) - peak(flash)) / expected, 1.0, 0.001);
  EXPECT_NE(run_cli("--sailor-plan " + file + " --model opt-350m --attention sparse").rc, 0);
}

TEST(PlanEvaluateCli, OutOfMemoryIsReportedWithExitOne) {
  const std::string plan = R"({"pipeline_list":[{"num_stages":1,"layers_per_stage":[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]],
    "tmp_per_stage":[[[[["V100-16",1,"z"]],1]]],"dp":[1]}],"mbs":8,"gbs":8})";
  const CliRun r = run_cli("--sailor-plan " + write_temp("oom", plan) + " --model gpt-neo-2.7b --json");
  EXPECT_EQ(r.rc, 1);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["feasible"].get<bool>());
  EXPECT_EQ(j["infeasible"]["kind"], "out_of_memory");
  EXPECT_NE(r.err.find("OOM on rank 0"), std::string::npos) << r.err;
}

// Every rank's runtime overheads are in the JSON: one GH200 stage at TP 4 inside a node, DP 1:
// the TP group's NCCL buffers only (16 channels x 2 connections x (4 MiB + 512 KiB + 4,915,200 B)),
// Hopper's 32 MiB cuBLAS workspace, the catalog's GH200 context; overhead_bytes is those plus
// the allocator's fraction of the dynamic bytes.
TEST(PlanEvaluateCli, RuntimeOverheadsPerRank) {
  const CliRun r = run_cli("--sailor-plan " + write_temp("rt", kOpt350OneStageTp4) + " --model opt-350m --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto rank = nlohmann::json::parse(r.out)["ranks"][0];
  EXPECT_EQ(rank["runtime"]["nccl_bytes"].get<std::int64_t>(), 16LL * 2 * (4194304 + 524288 + 4915200));
  EXPECT_EQ(rank["runtime"]["cublas_workspace_bytes"].get<std::int64_t>(), 32LL << 20);
  EXPECT_EQ(rank["runtime"]["cuda_context_bytes"].get<std::int64_t>(), 4949000000LL);
  const auto& m = rank["memory"];
  const double dynamic = m["activations_bytes"].get<double>() + m["transient_bytes"].get<double>();
  const double runtime = 4949000000.0 + 16.0 * 2 * (4194304 + 524288 + 4915200) + 33554432.0;
  EXPECT_NEAR(m["overhead_bytes"].get<double>(), runtime + 0.0452 * dynamic, 2.0);
}
