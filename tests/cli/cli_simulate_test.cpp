// `flotilla simulate` as a real process: bad input gets one line and exit 2; a small trace gives
// JSON whose numbers match a hand-computed FCFS schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/data_path.h"

namespace fs = std::filesystem;

namespace {
const fs::path kBinary = fs::path(FLOTILLA_BINARY_DIR) / "cli" / "flotilla";

struct Run {
  int status = -1;
  std::string out;
};

Run run(const std::string& args, const fs::path& cwd = {}) {
  Run r;
  const std::string cd = cwd.empty() ? "" : "cd '" + cwd.string() + "' && ";
  const std::string cmd = cd + kBinary.string() + " simulate " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Why a replay through the binary skips, or "" when it runs: it needs the built binary and
// Sailor's profiles and network fits.
std::string replay_skip_reason() {
  if (!fs::exists(kBinary)) return "build the flotilla target first: " + kBinary.string();
  if (!flotilla::data_path("sailor/profiles") || !flotilla::data_path("sailor/network"))
    return flotilla::data_missing_message("sailor/profiles");
  return "";
}

fs::path write(const std::string& name, const std::string& text) {
  const auto p = fs::temp_directory_path() / ("flotilla_cli_sim_" + std::to_string(::getpid()) + name);
  std::ofstream(p) << text;
  return p;
}
}  // namespace

TEST(ScalerCliSimulate, BadInputIsOneLineAndUsageExit) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "build the flotilla target first: " << kBinary;
  auto r = run("--trace x.csv --policy fastest");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown policy 'fastest'"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = run("--policy static");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--trace FILE is required"), std::string::npos);
  r = run("--trace /nonexistent.csv");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot read trace"), std::string::npos);
}

TEST(ScalerCliSimulate, JsonMatchesAHandComputedSchedule) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "build the flotilla target first: " << kBinary;
  const auto trace = write("t.csv",
                           "job_id,submission_time,duration,num_gpu\n"
                           "A,0,100,8\nB,10,50,4\nC,20,10,4\n");
  const auto cluster = write("c.yaml", "pools:\n  - {gpu: H100-80, nodes: 1, gpus_per_node: 8}\n");
  const auto r = run("--trace " + trace.string() + " --cluster " + cluster.string() +
                     " --policy static --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cluster_gpus"], 8);
  EXPECT_EQ(j["metrics"]["jobs"], 3);
  EXPECT_NEAR(j["metrics"]["nonelastic_queue_mean_s"].get<double>(), 170.0 / 3, 1e-9);
  EXPECT_NEAR(j["metrics"]["gpu_utilization"].get<double>(), 1040.0 / 1200, 1e-9);
  EXPECT_TRUE(j["invariant_violations"].empty());
  fs::remove(trace);
  fs::remove(cluster);
}

TEST(ScalerCliSimulate, AlibabaPodsOnTypedNodesByHand) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "build the flotilla target first: " << kBinary;
  // Two nodes of different types. P1 may only use T4, so it waits for P0 (on the T4 node) to
  // end at 100, although the V100 node is idle; P2 (any type) could run on the V100 but static
  // FCFS blocks it behind P1 (no backfilling), so it starts at 100 too, on the V100.
  const auto pods = write("pods.csv",
                          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                          "creation_time,deletion_time,scheduled_time\n"
                          "P0,1000,1024,2,1000,T4,LS,Running,0,100,0\n"
                          "P1,1000,1024,2,1000,T4,LS,Running,10,60,10\n"
                          "P2,1000,1024,2,1000,,LS,Running,20,50,20\n");
  const auto nodes = write("nodes.csv",
                           "sn,cpu_milli,memory_mib,gpu,model\n"
                           "t4-node,64000,262144,2,T4\nv100-node,64000,262144,2,V100M16\n");
  auto r = run("--trace " + pods.string() + " --cluster " + nodes.string() + " --policy static --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["invariant_violations"].empty());
  EXPECT_EQ(j["gpu_types"]["T4"]["jobs"], 2);
  EXPECT_EQ(j["gpu_types"]["V100M16"]["jobs"], 1);
  // Queue: P0 0, P1 100 - 10 = 90, P2 100 - 20 = 80. Busy 2*100 + 2*50 + 2*30 GPU-s of 4 x 150.
  EXPECT_NEAR(j["metrics"]["nonelastic_queue_mean_s"].get<double>(), 170.0 / 3, 1e-9);
  EXPECT_NEAR(j["metrics"]["gpu_utilization"].get<double>(), 360.0 / 600, 1e-9);
  r = run("--trace " + pods.string() + " --cluster " + nodes.string() + " --models best");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--models is auto, table2 or planner"), std::string::npos) << r.out;
  fs::remove(pods);
  fs::remove(nodes);
}

TEST(ScalerCliSimulate, GarbledNumbersAndStrayWordsAreOneLine) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "build the flotilla target first: " << kBinary;
  const auto trace = write("g.csv", "job_id,submission_time,duration,num_gpu\nA,0,100,8\n");
  const std::string t = "--trace " + trace.string() + " ";
  // nan passed every range check; 1.5 and 1e300 were cast to integers (the latter undefined).
  const std::pair<std::string, std::string> cases[] = {
      {"--elastic-fraction nan", "--elastic-fraction must be a number in [0, 1]"},
      {"--p-th nan", "--p-th must be in (0, 1)"},
      {"--window-h inf", "--window-h must be a number of hours > 0"},
      {"--window-h 1e308", "--window-h must be a number of hours > 0"},
      {"--seed 1.5", "--seed must be a whole number"},
      {"--min-gpus 1e300", "--min-gpus must be a whole number >= 1"},
      {"--lose-node 10:1e20", "--lose-node takes TIME_S:NODE_INDEX"},
      {"--join-node -5:0", "--join-node takes TIME_S:NODE_INDEX"},
      {"--cluster auto:0", "--cluster auto:LOAD needs a number LOAD >= 0.01"},
      {"static", "unknown option 'static'"},  // a stray word, not "static needs a value"
      // Refused before the sweep's simulations run, not after.
      {"--plot /nonexistent-dir/fig.png", "directory /nonexistent-dir does not exist"},
      {"--plot \"/tmp/it's.png\"", "contains a single quote"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run(t + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
  // A cluster file whose name starts with "auto", given relative to the working directory, is a
  // file, not auto:LOAD.
  const auto dir = fs::temp_directory_path() / ("flotilla_cli_sim_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto cluster = dir / "auto.yaml";
  std::ofstream(cluster) << "pools:\n  - {gpu: H100-80, nodes: 3, gpus_per_node: 8}\n";
  const auto r = run(t + "--cluster auto.yaml --policy static --json", dir);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["cluster_gpus"], 24);
  fs::remove_all(dir);
  fs::remove(trace);
}

// `flotilla simulate availability`: the short-gain trace of availability_test.cpp through the real
// binary. With restart 60 s, P_th 0.95 and a 600-s window, flextrain refuses the 10-s gain at
// 1000 s and ends 70 s x X4 ahead of greedy, X4 = the fastest plan on <= 4 GPUs (from the
// command's own plan list; the difference is computed here, not printed by the command).
TEST(ScalerCliSimulateAvailability, ShortGainByHandThroughTheBinary) {
  if (const std::string why = replay_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto trace = write("avail.json",
                           R"([{"Time":0,"GPUs":8},{"Time":500,"GPUs":4},{"Time":1000,"GPUs":8},)"
                           R"({"Time":1010,"GPUs":4},{"Time":2000,"GPUs":4}])");
  const auto r = run("availability --trace " + trace.string() +
                     " --model OPT-350 --gpu A100-40 --restart-seconds 60 --p-th 0.95"
                     " --window-h 0.16666666666666666 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "OPT-350M");
  EXPECT_TRUE(j["profiled"].get<bool>());
  double x4 = 0;
  for (const auto& p : j["plans"])
    if (p["gpus"].get<int>() <= 4) x4 = std::max(x4, p["samples_per_s"].get<double>());
  ASSERT_GT(x4, 0);
  std::map<std::string, nlohmann::json> by;
  for (const auto& p : j["policies"]) by[p["policy"].get<std::string>()] = p;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(by["greedy"]["restarts"], 3);
  EXPECT_EQ(by["flextrain"]["restarts"], 1);
  EXPECT_EQ(by["static"]["restarts"], 1);
  EXPECT_NEAR(by["flextrain"]["samples"].get<double>() - by["greedy"]["samples"].get<double>(),
              70 * x4, 1e-6 * by["flextrain"]["samples"].get<double>());
  bool refused = false;
  for (const auto& d : by["flextrain"]["decisions"])
    if (d["action"] == "refused") {
      refused = true;
      EXPECT_EQ(d["time_s"], 1000);
      EXPECT_NEAR(d["benefit_check"]["lambda_per_s"].get<double>(), 1.0 / 600, 1e-9);
      EXPECT_EQ(d["benefit_check"]["overhead_s"], 60);
    }
  EXPECT_TRUE(refused);
  fs::remove(trace);
}

// The last --policy wins: `greedy` then `all` replays all three, `all` then `greedy` only greedy.
TEST(ScalerCliSimulateAvailability, LastPolicyFlagWinsAllIncluded) {
  if (const std::string why = replay_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto trace = write("policies.json", R"([{"Time":0,"GPUs":4},{"Time":600,"GPUs":2}])");
  const std::string base = "availability --trace " + trace.string() +
                           " --model OPT-350 --gpu A100-40 --restart-seconds 60 --json";
  for (const auto& [flags, expected] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {" --policy greedy --policy all", {"static", "greedy", "flextrain"}},
           {" --policy all --policy greedy", {"greedy"}},
           {" --policy static --policy flextrain", {"flextrain"}}}) {
    const auto r = run(base + flags);
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.out;
    const auto j = nlohmann::json::parse(r.out);
    std::vector<std::string> got;
    for (const auto& p : j["policies"]) got.push_back(p["policy"]);
    EXPECT_EQ(got, expected) << flags;
  }
  fs::remove(trace);
}

TEST(ScalerCliSimulateAvailability, BadInputIsOneLine) {
  if (!fs::exists(kBinary)) GTEST_SKIP() << "build the flotilla target first: " << kBinary;
  struct Case {
    std::string args;
    int status;
    const char* says;
  };
  const auto absurd = write("absurd.json", R"([{"Time":0,"GPUs":4},{"Time":1e300,"GPUs":2}])");
  const auto ok = write("ok.json", R"([{"Time":0,"GPUs":4},{"Time":60,"GPUs":2}])");
  const auto one_row = write("one_row.json", R"([{"Time":0,"GPUs":4}])");
  const auto huge = write("huge.json", R"([{"Time":0,"GPUs":4},{"Time":60,"GPUs":1048576}])");
  const bool data = flotilla::data_path("sailor/profiles") && flotilla::data_path("sailor/network");
  std::vector<Case> cases = {
      {"availability --model OPT-350 --gpu A100-40", 2, "are required"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --policy fastest", 2, "unknown policy"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --gpus-per-node 0", 2, "--gpus-per-node"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --restart-seconds -1", 2, "--restart-seconds"},
      {"availability --trace t.json --model no-such --gpu A100-40", 2, "unknown model"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --bogus 1", 2, "unknown option"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --attention fused", 2, "--attention must be flash or materialized"},
      {"availability --trace t.json --model OPT-350 --gpu A100-40 --tp 0", 2, "--tp"},
  };
  if (data) {
    cases.push_back({"availability --trace " + absurd.string() + " --model OPT-350 --gpu A100-40", 1, "row 1"});
    cases.push_back({"availability --trace /nonexistent.json --model OPT-350 --gpu A100-40", 1, "cannot read"});
    cases.push_back({"availability --trace " + ok.string() + " --model OPT-350 --gpu A100-40 --profiles /nonexistent", 1, "profiles"});
    cases.push_back({"availability --trace " + one_row.string() + " --model OPT-350 --gpu A100-40", 1, "spans 0 s"});
    cases.push_back({"availability --trace " + huge.string() + " --model OPT-350 --gpu A100-40", 1, "row 1: GPUs must be a whole number in [0, 16384]"});
    // The fix is named: the catalog's types.
    cases.push_back({"availability --trace " + ok.string() + " --model OPT-350 --gpu B999", 1, "use a catalog type (A100-40, A100-80, H100-80"});
  }
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.args << "\n" << r.out;
  }
  fs::remove(absurd);
  fs::remove(ok);
  fs::remove(one_row);
  fs::remove(huge);
}

// Llama-3-8B on 16 A100-40s: with the default (flash attention, as `flotilla plan`) and TP picked
// among 1, 2, 4 it runs, at TP 4 (TP 1 and 2 need over 40 GB on the first stage of a time-balanced
// split: ~1.4 GB of activations per layer and micro-batch at TP 1); materialised scores (5*a*s^2/t
// = 2.7 GB per layer even at TP 4) fit nowhere, in one line.
TEST(ScalerCliSimulateAvailability, LlamaRunsWithFlashAttentionByDefault) {
  if (const std::string why = replay_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto trace = write("llama.json", R"([{"Time":0,"GPUs":16},{"Time":600,"GPUs":8},{"Time":1200,"GPUs":8}])");
  const std::string base = "availability --trace " + trace.string() + " --model LLAMA-3-8 --gpu A100-40 --restart-seconds 60";
  const auto r = run(base + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["attention"], "flash");
  EXPECT_EQ(j["tp"], 4);
  ASSERT_FALSE(j["plans"].empty());
  EXPECT_EQ(j["plans"].front()["gpus"], 8);  // 4 GPUs would hold all 32 layers on one TP-4 stage
  const auto m = run(base + " --attention materialized");
  EXPECT_EQ(m.status, 1) << m.out;
  EXPECT_NE(m.out.find("no layout of Llama-3-8B on A100-40 fits"), std::string::npos) << m.out;
  EXPECT_EQ(std::count(m.out.begin(), m.out.end(), '\n'), 1) << m.out;
  fs::remove(trace);
}
