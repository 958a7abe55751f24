// The closed loop, end to end: `flotilla up` (real devcluster, real operator), a TrainingJob
// applied with real kubectl, pods running the real sidecar and worker processes. Each loss log
// is compared bit for bit with an uninterrupted `flotilla-worker run` of the same job.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube/client.h"
#include "kube/config.h"
#include "process/spawn.h"
#include "tests/common/tools.h"
#include "tests/devcluster/devcluster_process.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using devcluster_test::run_command;

std::string bin(const std::string& rel) { return std::string(FLOTILLA_BINARY_DIR) + "/" + rel; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An emulated GPU type 1/1000 of a TFLOP/s fast, so the small reference model gains from
// pipelining and the planner scales it up (docs/operator.md).
const char* kCatalog = R"(gpus:
  emu-slow: {memory_gb: 16, peak_bf16_tflops: 0.001, compute_efficiency: 1, mem_bandwidth_bytes_per_s: 1e11,
             gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11, inter_node_bandwidth_bytes_per_s: 1e10,
             usd_per_hour: 1}
)";

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
    std::ofstream(dir_ / "nodes.yaml") << "nodes:\n  - {name: n0, gpuType: emu-slow, gpuCount: 2, zone: z}\n"
                                          "  - {name: n1, gpuType: emu-slow, gpuCount: 2, zone: z}\n";
    std::ofstream(dir_ / "catalog.yaml") << kCatalog;
    std::string text;
    for (int i = 0; text.size() < 60000; ++i)
      text += "the flotilla sails on, ship " + std::to_string(i % 97) + " keeps watch.\n";
    std::ofstream(dir_ / "data.txt") << text;
    auto r = run_command(bin("cli/flotilla") + " up --detach --nodes " + (dir_ / "nodes.yaml").string() + " --dir " +
                         (dir_ / "state").string() + " --gpu-catalog " + (dir_ / "catalog.yaml").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    up_ = true;
  }
  void TearDown() override {
    if (up_) run_command(bin("cli/flotilla") + " down --dir " + (dir_ / "state").string());
    if (!HasFailure()) fs::remove_all(dir_);
  }
  devcluster_test::CommandResult kubectl(const std::string& args) {
    return run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " +
                       (dir_ / "state/kubeconfig").string() + " " + args);
  }
  void apply_job(int steps, const std::string& name = "demo", int priority = 0) {
    // Not created here: the sidecar creates the checkpoint folder.
    const fs::path ckpt = name == "demo" ? dir_ / "ckpt" : dir_ / ("ckpt-" + name);
    const fs::path file = dir_ / (name + ".yaml");
    std::ofstream(file) << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: " << name
                        << "}\nspec:\n  model: small\n  globalBatchSize: 8\n  priority: " << priority
                        << "\n  trainSteps: " << steps
                        << "\n  worker: {image: flotilla-worker:dev, data: " << (dir_ / "data.txt").string()
                        << "}\n  checkpoint: {path: " << ckpt.string()
                        << ", intervalSteps: 20}\n  elasticity: {minRescaleIntervalSeconds: 0}\n";
    auto r = kubectl("apply -f " + file.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string field(const std::string& jsonpath, const std::string& job = "demo") {
    return kubectl("get tj " + job + " -o 'jsonpath={" + jsonpath + "}'").output;
  }
  bool wait_for(const std::function<bool()>& pred, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(300ms);
    }
    return pred();
  }
  // An uninterrupted run of the same job (model, data, seed, batch geometry, steps).
  std::string reference_loss(int steps) {
    const fs::path ref = dir_ / ("ref-" + std::to_string(steps));
    fs::create_directories(ref);
    auto r = run_command(bin("worker/flotilla-worker") +
                         " run --world-size 1 --pp 1 --dp 1 --model small --global-batch 8 --micro-batch 1 "
                         "--virtual-shards 8 --seed 1234 --steps " +
                         std::to_string(steps) + " --data " + (dir_ / "data.txt").string() + " --checkpoint-dir " +
                         (ref / "ckpt").string() + " --loss-log " + (ref / "loss.log").string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return slurp(ref / "loss.log");
  }
  std::string events() { return kubectl("get events --sort-by=.metadata.resourceVersion").output; }

  fs::path dir_;
  bool up_ = false;
};

}  // namespace

TEST_F(LocalCluster, JobRunsFromApplyToSucceededWithEveryStepOnce) {
  apply_job(60);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 90s)) << field(".status") << "\n"
                                                                                    << events();
  EXPECT_NE(events().find("Planned"), std::string::npos);
  EXPECT_EQ(field(".status.progress.step"), "60");
  const std::string loss = slurp(dir_ / "ckpt/loss.log");
  EXPECT_EQ(std::count(loss.begin(), loss.end(), '\n'), 60);
  EXPECT_EQ(loss, reference_loss(60)) << "the loss log differs from an uninterrupted run";
}

TEST_F(LocalCluster, ScalesUpThroughTheBenefitCheckThenShrinksOnNodeLossAndStaysBitIdentical) {
  apply_job(500);
  // Admitted at its smallest size (1 GPU), then grown while nobody waits: the benefit check's
  // inputs are in status.lastDecision.
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "4" && field(".status.phase") == "Running"; }, 60s))
      << field(".status") << "\n"
      << events();
  EXPECT_EQ(field(".status.plan.pp"), "4");
  EXPECT_EQ(field(".status.plan.dp"), "1");
  EXPECT_EQ(field(".status.lastDecision.action"), "scale-up");
  EXPECT_FALSE(field(".status.lastDecision.probability").empty());
  EXPECT_FALSE(field(".status.lastDecision.arrivalRatePerSecond").empty());
  ASSERT_TRUE(wait_for([&] { return std::atoi(field(".status.progress.step").c_str()) >= 80; }, 60s));
  // Node n1 fails mid-training: PP-first shrink onto n0.
  auto r = run_command(bin("devcluster/flotilla-devcluster") + " admin fail-node n1 --kubeconfig " +
                       (dir_ / "state/kubeconfig").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "2"; }, 30s)) << field(".status") << "\n" << events();
  EXPECT_EQ(field(".status.plan.pp"), "2");
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  const std::string loss = slurp(dir_ / "ckpt/loss.log");
  EXPECT_EQ(std::count(loss.begin(), loss.end(), '\n'), 500);
  EXPECT_EQ(loss, reference_loss(500)) << "the loss log differs from an uninterrupted run";
}

// Two jobs compete: the first holds every GPU after scaling up; the second, of higher priority,
// waits, the first gives back its scaled-up GPUs (FlexTrain §5.2), the second is admitted, and
// both finish with loss logs equal to uninterrupted runs.
TEST_F(LocalCluster, ASecondJobReclaimsTheFirstJobsScaledUpGpusAndBothFinish) {
  apply_job(700);
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "4" && field(".status.phase") == "Running"; }, 60s))
      << field(".status") << "\n"
      << events();
  apply_job(120, "second", 1);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase", "second") == "Running"; }, 60s))
      << field(".status", "second") << "\n"
      << field(".status") << "\n"
      << events();
  EXPECT_LT(std::atoi(field(".status.plan.gpus").c_str()), 4) << "the first job gave GPUs back";
  EXPECT_NE(events().find("Preempted"), std::string::npos) << events();
  ASSERT_TRUE(wait_for([&] { return field(".status.phase", "second") == "Succeeded"; }, 90s)) << events();
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 150s)) << field(".status") << "\n"
                                                                                     << events();
  EXPECT_EQ(slurp(dir_ / "ckpt-second/loss.log"), reference_loss(120));
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(700));
}

// A checkpoint path the pods cannot create is a clear Failed condition naming the path and what
// to fix, not a crash loop.
TEST_F(LocalCluster, AnUnwritableCheckpointPathFailsTheJobWithAClearCondition) {
  std::ofstream(dir_ / "blocker") << "a file where the checkpoint folder's parent should be";
  std::ofstream(dir_ / "bad.yaml") << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: demo}\n"
                                      "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 10\n"
                                      "  worker: {image: w, data: "
                                   << (dir_ / "data.txt").string()
                                   << "}\n  checkpoint: {path: " << (dir_ / "blocker/ckpt").string() << "}\n";
  ASSERT_EQ(kubectl("apply -f " + (dir_ / "bad.yaml").string()).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Failed"; }, 60s)) << field(".status") << "\n"
                                                                                 << events();
  const std::string message = field(".status.conditions[?(@.type==\"Failed\")].message");
  EXPECT_NE(message.find("cannot create the checkpoint folder '" + (dir_ / "blocker/ckpt").string() + "'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("spec.checkpoint.path"), std::string::npos) << message;
}

// The operator is SIGKILLed in the middle of a rescale (status says Rescaling: the new epoch is
// written, the pods are not all there) and started again: it resumes that rescale from
// status.plan instead of starting another, and the job finishes bit-identical.
TEST_F(LocalCluster, OperatorKilledMidRescaleResumesItOnce) {
  std::ifstream in(dir_ / "state/flotilla-up.json");
  const auto up = nlohmann::json::parse(in);
  const pid_t op = up.value("operatorPid", 0);
  ASSERT_GT(op, 0);
  std::ifstream cmdline("/proc/" + std::to_string(op) + "/cmdline");
  std::vector<std::string> argv;
  for (std::string a; std::getline(cmdline, a, '\0');) argv.push_back(a);
  ASSERT_FALSE(argv.empty());
  auto config = flotilla::kube::load_kubeconfig((dir_ / "state/kubeconfig").string());
  ASSERT_TRUE(config);
  auto client = flotilla::kube::Client::create(*config).value();
  const flotilla::kube::Resource tjs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};
  apply_job(600);
  // Mid-rescale: the new epoch is in status.plan, its barrier not lifted yet (a window of well
  // under a second, so this polls the API directly every 10 ms).
  bool mid_rescale = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 60s;
       !mid_rescale && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    auto job = client->get(tjs, "default", "demo");
    mid_rescale = job && job->value("/status/phase"_json_pointer, std::string()) == "Rescaling";
  }
  ASSERT_TRUE(mid_rescale) << field(".status");
  ASSERT_EQ(::kill(op, SIGKILL), 0);
  const std::string epoch_at_kill = field(".status.plan.epoch");
  flotilla::process::SpawnOptions again;
  again.argv = argv;
  again.stdout_path = again.stderr_path = dir_ / "state/operator-2.log";
  flotilla::process::Child restarted = flotilla::process::spawn(again);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  // The rescale the first operator started is the one that ran: at most one plan for that epoch,
  // and no later epoch (all four GPUs are in use, so nothing else would rescale).
  auto list = client->list(flotilla::kube::resources::events, "default");
  ASSERT_TRUE(list);
  int plans_for_epoch = 0;
  for (const auto& e : (*list)["items"])
    if (e.value("reason", "") == "Planned" && e.value("message", "").rfind("epoch " + epoch_at_kill + ":", 0) == 0)
      plans_for_epoch += e.value("count", 1);
  // The first operator may have died before recording its event; the second never plans it again.
  EXPECT_LE(plans_for_epoch, 1) << events();
  EXPECT_EQ(field(".status.plan.epoch"), epoch_at_kill) << "the restart started another rescale\n" << events();
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(600));
  restarted.terminate(5000ms);
}

// A sidecar SIGKILLed mid-training fails its pod (restartPolicy Never); the operator re-plans
// under a new epoch, the pod is replaced, training resumes from the newest complete checkpoint,
// and the loss log still equals an uninterrupted run (redone steps replace their lines).
TEST_F(LocalCluster, AKilledSidecarFailsItsPodAndTheOperatorReplansIt) {
  apply_job(500);
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "4" && field(".status.phase") == "Running"; }, 60s))
      << field(".status") << "\n"
      << events();
  ASSERT_TRUE(wait_for([&] { return std::atoi(field(".status.progress.step").c_str()) >= 60; }, 60s));
  const std::string epoch_before = field(".status.plan.epoch");
  // This cluster's sidecars: the program is flotilla-sidecar (argv[0]; the operator's own command
  // line names it too) and its kubeconfig is this cluster's.
  auto pids = run_command("pgrep -f '^[^ ]*flotilla-sidecar --kubeconfig " + (dir_ / "state/kubeconfig").string() +
                          "' | head -n 1");
  ASSERT_EQ(pids.exit_code, 0) << pids.output;
  ASSERT_EQ(::kill(std::atoi(pids.output.c_str()), SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.epoch") != epoch_before; }, 30s)) << events();
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(500));
}
