// The fixture of the operator's end-to-end tests: `flotilla up` on two 2-GPU nodes of an emulated
// slow GPU type in a fresh folder, real kubectl against it, and an uninterrupted reference run of
// the reference worker to compare loss logs with, bit for bit.
// Assumes the binaries of this build tree (FLOTILLA_BINARY_DIR); skips when kubectl is missing.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/text_file.h"
#include "process/poll_until.h"
#include "tests/common/tools.h"
#include "tests/devcluster/devcluster_process.h"

namespace operator_e2e {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using devcluster_test::run_command;

inline std::string bin(const std::string& rel) { return std::string(FLOTILLA_BINARY_DIR) + "/" + rel; }

inline std::string slurp(const std::filesystem::path& path) { return flotilla::read_text(path); }

// An emulated GPU type 1/1000 of a TFLOP/s fast, so the small reference model gains from
// pipelining and the planner scales it up (docs/operator.md).
inline const char* kCatalog = R"(gpus:
  emu-slow: {memory_gb: 16, peak_bf16_tflops: 0.001, compute_efficiency: 1, mem_bandwidth_bytes_per_s: 1e11,
             gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11, inter_node_bandwidth_bytes_per_s: 1e10,
             usd_per_hour: 1}
)";

// The command line of a running process, as /proc has it (to start it again the same way).
inline std::vector<std::string> command_line_of(pid_t pid) {
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> argv;
  for (std::string a; std::getline(cmdline, a, '\0');) argv.push_back(a);
  return argv;
}

class LocalCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!flotilla::testing::tools_installed() &&
        run_command(flotilla::testing::tool_path("kubectl") + " version --client").exit_code != 0)
      GTEST_SKIP() << flotilla::testing::tool_missing_message("kubectl");
    dir_ = fs::temp_directory_path() /
           ("flotilla-e2e-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "nodes.yaml") << nodes_yaml();
    std::ofstream(dir_ / "catalog.yaml") << catalog_yaml();
    std::string text;
    for (int i = 0; text.size() < 60000; ++i)
      text += "the flotilla sails on, ship " + std::to_string(i % 97) + " keeps watch.\n";
    std::ofstream(dir_ / "data.txt") << text;
    auto r = run_command(bin("cli/flotilla") + " up --detach --nodes " + (dir_ / "nodes.yaml").string() + " --dir " +
                         (dir_ / "state").string() + " --gpu-catalog " + (dir_ / "catalog.yaml").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    up_ = true;
  }
  // The cluster `flotilla up` starts: two 2-GPU nodes of kCatalog's emu-slow, unless a test's
  // fixture says otherwise.
  virtual std::string nodes_yaml() const {
    return "nodes:\n  - {name: n0, gpuType: emu-slow, gpuCount: 2, zone: z}\n"
           "  - {name: n1, gpuType: emu-slow, gpuCount: 2, zone: z}\n";
  }
  virtual std::string catalog_yaml() const { return kCatalog; }
  void TearDown() override {
    if (up_) run_command(bin("cli/flotilla") + " down --dir " + (dir_ / "state").string());
    if (!HasFailure()) fs::remove_all(dir_);
  }
  devcluster_test::CommandResult kubectl(const std::string& args) {
    return run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " +
                       (dir_ / "state/kubeconfig").string() + " " + args);
  }
  void apply_job(int steps, const std::string& name = "demo", int priority = 0,
                 const std::string& elasticity_mode = "") {
    // Not created here: the sidecar creates the checkpoint folder.
    const fs::path ckpt = name == "demo" ? dir_ / "ckpt" : dir_ / ("ckpt-" + name);
    const fs::path file = dir_ / (name + ".yaml");
    std::ofstream(file) << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: " << name
                        << "}\nspec:\n  model: small\n  globalBatchSize: 8\n  priority: " << priority
                        << "\n  trainSteps: " << steps
                        << "\n  worker: {image: flotilla-worker:dev, data: " << (dir_ / "data.txt").string()
                        << "}\n  checkpoint: {path: " << ckpt.string() << ", intervalSteps: 20}\n  elasticity: {"
                        << (elasticity_mode.empty() ? "" : "mode: " + elasticity_mode + ", ")
                        << "minRescaleIntervalSeconds: 0}\n";
    auto r = kubectl("apply -f " + file.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string field(const std::string& jsonpath, const std::string& job = "demo") {
    return kubectl("get tj " + job + " -o 'jsonpath={" + jsonpath + "}'").output;
  }
  bool wait_for(const std::function<bool()>& pred, std::chrono::seconds limit) {
    return flotilla::process::poll_until(pred, limit, 300ms);
  }
  // An uninterrupted run of the same job (model, data, seed, batch geometry, steps).
  std::string reference_loss(int steps) { return reference_loss(std::vector<int>{steps}); }
  // The same job run to legs[0] steps, then resumed from its checkpoint to legs[1], ...: the
  // worker's own resume, as a job whose trainSteps is raised after it finished should train.
  std::string reference_loss(const std::vector<int>& legs) {
    std::string tag;
    for (int steps : legs) tag += "-" + std::to_string(steps);
    const fs::path ref = dir_ / ("ref" + tag);
    fs::create_directories(ref);
    for (int steps : legs) {
      auto r = run_command(bin("worker/flotilla-worker") +
                           " run --world-size 1 --pp 1 --dp 1 --model small --global-batch 8 --micro-batch 1 "
                           "--virtual-shards 8 --seed 1234 --steps " +
                           std::to_string(steps) + " --data " + (dir_ / "data.txt").string() + " --checkpoint-dir " +
                           (ref / "ckpt").string() + " --loss-log " + (ref / "loss.log").string());
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return slurp(ref / "loss.log");
  }
  // What `flotilla up` recorded: pids, start times, ports (cli/local_cluster.cpp).
  nlohmann::json up_state() const {
    std::ifstream in(dir_ / "state/flotilla-up.json");
    return nlohmann::json::parse(in);
  }
  std::string events() { return kubectl("get events --sort-by=.metadata.resourceVersion").output; }
  // How many times `reason` was recorded for TrainingJob `job` (an event repeated is one object
  // with a count).
  int event_count(const std::string& reason, const std::string& job) {
    // A warning on stderr is not JSON: kept out inside the subshell (run_command merges stderr).
    const auto r = run_command("(" + flotilla::testing::tool_path("kubectl") + " --kubeconfig " +
                               (dir_ / "state/kubeconfig").string() + " get events -o json 2>/dev/null)");
    const nlohmann::json list = nlohmann::json::parse(r.output, nullptr, false);
    if (list.is_discarded()) {
      ADD_FAILURE() << "kubectl get events -o json: " << r.output;
      return -1;
    }
    int n = 0;
    for (const nlohmann::json& e : list.value("items", nlohmann::json::array()))
      if (e.value("reason", "") == reason && e.value("/involvedObject/name"_json_pointer, std::string()) == job)
        n += e.value("count", 1);
    return n;
  }

  fs::path dir_;
  bool up_ = false;
};

}  // namespace operator_e2e
