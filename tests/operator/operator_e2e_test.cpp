// The closed loop, end to end: `flotilla up` (real devcluster, real operator), a TrainingJob
// applied with real kubectl, pods running the real sidecar and worker processes. Each loss log
// is compared bit for bit with an uninterrupted `flotilla-worker run` of the same job.
#include <gtest/gtest.h>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/net/http_client.h"
#include "process/spawn.h"
#include "tests/operator/local_cluster_fixture.h"

using namespace operator_e2e;

namespace {

// The operator's /metrics page (the port `flotilla up` recorded), or why it could not be read.
std::string operator_metrics(const nlohmann::json& up_state) {
  flotilla::kube::net::ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(up_state.value("metricsPort", 0));
  std::string error;
  auto client = flotilla::kube::net::HttpClient::create(config, &error);
  if (!client) return "no client for the operator's metrics: " + error;
  const auto scrape = client->get("/metrics");
  return scrape.ok() ? scrape.response.body : "scraping the operator's metrics failed: " + scrape.error;
}

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
  // Deleted and re-created over its finished checkpoint: nothing is left to train, and the job
  // says it is at step 60, not 0.
  ASSERT_EQ(kubectl("delete tj demo --wait=true").exit_code, 0);
  apply_job(60);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 60s)) << field(".status");
  EXPECT_EQ(field(".status.progress.lastCheckpointStep"), "60");
  EXPECT_EQ(field(".status.progress.step"), "60") << field(".status.progress");
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), loss) << "the resumed run trained nothing again";
}

// Workers take trainSteps only at launch. Raised after the job finished, it trains on from the
// checkpoint with the same bits as the worker resuming itself; changed while it runs, the job is
// relaunched under a new epoch and ends at the new count with every step once.
TEST_F(LocalCluster, ChangingTrainStepsExtendsAFinishedJobAndRelaunchesARunningOne) {
  const auto set_train_steps = [&](int steps) {
    auto r = kubectl("patch tj demo --type merge -p '{\"spec\":{\"trainSteps\":" + std::to_string(steps) + "}}'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  };
  const auto succeeded_at = [&](const std::string& step) {
    return field(".status.phase") == "Succeeded" && field(".status.progress.step") == step;
  };
  apply_job(40);
  ASSERT_TRUE(wait_for([&] { return succeeded_at("40"); }, 90s)) << field(".status") << "\n" << events();
  EXPECT_EQ(field(".status.conditions[?(@.type==\"Complete\")].message"), "trained 40 steps");

  set_train_steps(80);
  ASSERT_TRUE(wait_for([&] { return succeeded_at("80"); }, 90s)) << field(".status") << "\n" << events();
  const std::string extended = slurp(dir_ / "ckpt/loss.log");
  EXPECT_EQ(extended, reference_loss({40, 80})) << "not the worker's own resume from step 40";
  EXPECT_EQ(field(".status.conditions[?(@.type==\"Complete\")].message"), "trained 80 steps");

  // Lowered while it runs (to a count it may already have passed: these emulated GPUs train
  // ~80 steps/s): relaunched, it stops at max(new count, the step of its stop checkpoint).
  set_train_steps(100000);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Running" && std::atoi(field(".status.progress.step").c_str()) >= 100; },
                       90s))
      << field(".status") << "\n" << events();
  const int epoch_before = std::atoi(field(".status.plan.epoch").c_str());
  set_train_steps(120);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 90s)) << field(".status") << "\n" << events();
  EXPECT_GT(std::atoi(field(".status.plan.epoch").c_str()), epoch_before) << "relaunched under a new epoch";
  EXPECT_NE(events().find("trainSteps: 100000 -> 120"), std::string::npos) << events();
  const std::string log = slurp(dir_ / "state/operator.log");
  EXPECT_NE(log.find("default/demo Normal SpecChanged: the spec changed what the workers run (trainSteps: 100000 -> 120)"),
            std::string::npos)
      << "the operator's log tells the events' story:\n" << log;
  const int final_step = std::atoi(field(".status.progress.step").c_str());
  EXPECT_GE(final_step, 120);
  EXPECT_EQ(field(".status.conditions[?(@.type==\"Complete\")].message"),
            "trained " + std::to_string(final_step) + " steps");
  const std::string loss = slurp(dir_ / "ckpt/loss.log");
  EXPECT_EQ(loss.substr(0, extended.size()), extended) << "the first 80 steps were rewritten";
  std::istringstream lines(loss);
  std::string line;
  int expected_step = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(std::atoi(line.c_str()), expected_step) << "every step once, in order:\n" << loss;
    ++expected_step;
  }
  EXPECT_EQ(expected_step, final_step);
}

// Gang start: a world over two pods starts its ranks only once both pods' sidecars are up. With
// node n1 pulling its image for 4 s, no rank runs while n1's pod is Pending (the barrier stays
// below the epoch), and the job then trains as if both had started together: no failure, the
// loss of an uninterrupted run.
TEST_F(LocalCluster, RanksInSeveralPodsStartTogetherAfterASlowImagePull) {
  ASSERT_EQ(kubectl("annotate node n1 devcluster.flotilla.io/image-pull-seconds=4").exit_code, 0);
  std::ofstream(dir_ / "job.yaml") << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: demo}\n"
                                      "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 30\n"
                                      "  resources: {minGPUs: 4}\n  worker: {image: w, data: "
                                   << (dir_ / "data.txt").string() << "}\n  checkpoint: {path: "
                                   << (dir_ / "ckpt").string() << "}\n";
  ASSERT_EQ(kubectl("apply -f " + (dir_ / "job.yaml").string()).exit_code, 0);
  int seen_pulling = 0;
  std::string started_early;
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string n1_phase = kubectl("get pod demo-n1-g2 -o 'jsonpath={.status.phase}'").output;
        const std::string barrier = field(".status.plan.barrier");
        if (n1_phase == "Pending") {
          ++seen_pulling;
          if (!barrier.empty() && barrier != "0") started_early = "barrier " + barrier + " while n1's pod is Pending";
        }
        return field(".status.phase") == "Succeeded";
      },
      90s))
      << field(".status") << "\n" << events();
  EXPECT_GT(seen_pulling, 0) << "n1's pod was never seen pulling: the test shows nothing";
  EXPECT_EQ(started_early, "");
  EXPECT_EQ(field(".status.plan.epoch"), "1") << "started once, never relaunched";
  EXPECT_EQ(field(".status.failures"), "");
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(30));
}

// One Pending pod must not hold the others hostage. The job runs on n0 while n1 is cordoned;
// n1 is then uncordoned with an image that takes an hour to pull, and the job grows onto it
// (PP over both nodes). n1's pod does not start within the job's podStartTimeoutSeconds (5 s):
// the job is re-planned on n0 alone, n1 is kept out of its plans (status.unavailableNodes, so it
// is not grown onto n1 again), and it finishes with the loss of an uninterrupted run.
TEST_F(LocalCluster, APodThatDoesNotStartIsLeftBehindAndTheJobGoesOnWithoutIt) {
  ASSERT_EQ(kubectl("annotate node n1 devcluster.flotilla.io/image-pull-seconds=3600").exit_code, 0);
  ASSERT_EQ(kubectl("cordon n1").exit_code, 0);
  std::ofstream(dir_ / "job.yaml") << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: demo}\n"
                                      "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 300\n"
                                      "  elasticity: {minRescaleIntervalSeconds: 0, podStartTimeoutSeconds: 5}\n"
                                      "  worker: {image: w, data: "
                                   << (dir_ / "data.txt").string()
                                   << "}\n  checkpoint: {path: " << (dir_ / "ckpt").string() << "}\n";
  ASSERT_EQ(kubectl("apply -f " + (dir_ / "job.yaml").string()).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Running"; }, 60s)) << field(".status") << events();
  ASSERT_EQ(kubectl("uncordon n1").exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  const auto status = nlohmann::json::parse(field(""))["status"];
  ASSERT_EQ(status["unavailableNodes"].size(), 1u) << status.dump() << "\n" << events();
  EXPECT_EQ(status["unavailableNodes"][0].value("node", ""), "n1");
  EXPECT_NE(
      status["unavailableNodes"][0].value("message", "").find("(Pending: ContainerCreating) did not start in 5 s"),
      std::string::npos)
      << status.dump();
  EXPECT_NE(events().find("PodStartTimeout"), std::string::npos) << events();
  for (const auto& pod : status["plan"]["pods"]) EXPECT_EQ(pod.value("node", ""), "n0") << status.dump();
  EXPECT_EQ(status.value("failures", nlohmann::json::object()).value("consecutive", 0), 0)
      << "a pod that did not start is not a worker failure";
  const std::string metrics = operator_metrics(up_state());
  EXPECT_NE(metrics.find("\nflotilla_pod_start_timeouts_total 1\n"), std::string::npos) << metrics;
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(300)) << "the loss log differs from an uninterrupted run";
}

// A data file that does not exist, on a world that spans two pods (so only the operator can
// relaunch it): the relaunches back off 1, 2 and 4 s, the 4th failure in a row without a step
// (spec.backoffLimit's default, 3) fails the job with the sidecar's line naming the file, and no
// pod is left. Re-applying the fixed spec runs the job to the end.
TEST_F(LocalCluster, AMissingDataFileFailsTheJobAfterBoundedBackoffAndTheFixedSpecRuns) {
  const fs::path missing = dir_ / "missing.txt";
  const auto manifest = [&](const fs::path& data) {
    std::ofstream(dir_ / "job.yaml") << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: demo}\n"
                                        "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 20\n"
                                        "  resources: {minGPUs: 4}\n  worker: {image: w, data: "
                                     << data.string() << "}\n  checkpoint: {path: " << (dir_ / "ckpt").string()
                                     << "}\n";
    return kubectl("apply -f " + (dir_ / "job.yaml").string());
  };
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(manifest(missing).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Failed"; }, 60s)) << field(".status") << "\n"
                                                                                 << events();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("missing data file: Failed after %.1f s at epoch %s\n", seconds, field(".status.plan.epoch").c_str());
  EXPECT_GE(seconds, 1 + 2 + 4) << "three relaunches, each after its backoff";
  EXPECT_LE(std::atoi(field(".status.plan.epoch").c_str()), 4) << "admission and three relaunches, no more";
  EXPECT_EQ(field(".status.failures.consecutive"), "4");
  EXPECT_EQ(field(".status.conditions[?(@.type==\"Failed\")].reason"), "BackoffLimitExceeded");
  const std::string message = field(".status.conditions[?(@.type==\"Failed\")].message");
  EXPECT_NE(message.find("data file '" + missing.string() + "' not found"), std::string::npos) << message;
  EXPECT_NE(message.find("spec.worker.data"), std::string::npos) << message;
  EXPECT_NE(message.find("re-apply"), std::string::npos) << message;
  EXPECT_TRUE(wait_for([&] { return kubectl("get pods -o name").output.empty(); }, 30s)) << kubectl("get pods").output;
  const std::string failed_epoch = field(".status.plan.epoch");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(field(".status.plan.epoch"), failed_epoch) << "Failed relaunches nothing";

  ASSERT_EQ(manifest(dir_ / "data.txt").exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 90s)) << field(".status") << "\n"
                                                                                    << events();
  EXPECT_EQ(field(".status.progress.step"), "20");
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(20));
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
  // Online profiling: the sidecars' measured stage seconds were folded into the job's model.
  EXPECT_NE(events().find("Profiled"), std::string::npos) << events();
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
  const int first_gpus = std::atoi(field(".status.plan.gpus").c_str());
  const int second_gpus = std::atoi(field(".status.plan.gpus", "second").c_str());
  EXPECT_LT(first_gpus, 4) << "the first job gave GPUs back\n" << events();
  EXPECT_LE(first_gpus + second_gpus, 4) << "the two plans share 4 GPUs\n" << events();
  // The second job needs 1 GPU: the first is told once to give back exactly that (4 - 1; its
  // plan may use fewer of the 3 if the planner finds them faster), and the second is not
  // admitted onto GPUs the first grows back into (the allocator judges plans, not lagging pods;
  // cluster_view.h).
  EXPECT_EQ(event_count("Preempted", "demo"), 1) << events();
  EXPECT_NE(events().find("gives 1 GPUs back for default/second: shrink 4 -> 3"), std::string::npos) << events();
  EXPECT_EQ(event_count("Requeued", "second"), 0) << events();
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

// Worker kind megatron, checked up to the exec of torchrun (this machine has no PyTorch): the
// operator renders the launch into status.plan.megatronArgs and the pods' plans, each pod's
// sidecar tries to exec torchrun with it, and the job fails with the one line that says what the
// image lacks, not a crash loop.
TEST_F(LocalCluster, AMegatronJobOnAnImageWithoutTorchrunFailsWithAClearCondition) {
  if (run_command("command -v torchrun").exit_code == 0)
    GTEST_SKIP() << "torchrun is on PATH here: this test checks the failure on an image without it";
  const char* env = std::getenv("FLOTILLA_MEGATRON_DIR");
  const fs::path snapshot = env != nullptr && *env != '\0'
                                ? fs::path(env)
                                : fs::path(FLOTILLA_SOURCE_DIR) / ".." / "shared" / "vendor" / "megatron-lm";
  if (!fs::exists(snapshot / "pretrain_gpt.py"))
    GTEST_SKIP() << "Megatron-LM snapshot not found at " << snapshot
                 << " (set FLOTILLA_MEGATRON_DIR): its pretrain_gpt.py is the job's script";
  const std::string script = fs::weakly_canonical(snapshot / "pretrain_gpt.py").string();
  std::ofstream(dir_ / "megatron.yaml")
      << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: demo}\n"
         "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 10\n"
         "  worker: {kind: megatron, image: w, megatron: {script: "
      << script << "}}\n  checkpoint: {path: " << (dir_ / "ckpt").string() << "}\n";
  ASSERT_EQ(kubectl("apply -f " + (dir_ / "megatron.yaml").string()).exit_code, 0);
  ASSERT_TRUE(wait_for([&] { return !field(".status.plan.megatronArgs").empty(); }, 60s)) << field(".status") << "\n"
                                                                                          << events();
  EXPECT_EQ(field(".status.plan.megatronArgs[0]"), script);
  EXPECT_NE(field(".status.plan.megatronArgs").find("--save"), std::string::npos);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Failed"; }, 90s)) << field(".status") << "\n"
                                                                                 << events();
  const std::string message = field(".status.conditions[?(@.type==\"Failed\")].message");
  EXPECT_NE(message.find("torchrun not found in PATH: the megatron worker kind needs an image with Megatron-LM and "
                         "PyTorch"),
            std::string::npos)
      << message;
  // Extra arguments that override a rendered flag: no plan can launch, and the job says why.
  std::ofstream(dir_ / "override.yaml")
      << "apiVersion: flotilla.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: over}\n"
         "spec:\n  model: small\n  globalBatchSize: 8\n  trainSteps: 10\n"
         "  worker: {kind: megatron, image: w, extraArgs: [--save=/x], megatron: "
         "{script: "
      << script << "}}\n  checkpoint: {path: " << (dir_ / "ckpt-over").string() << "}\n";
  ASSERT_EQ(kubectl("apply -f " + (dir_ / "override.yaml").string()).exit_code, 0);
  const std::string planned = ".status.conditions[?(@.type==\"Planned\")]";
  ASSERT_TRUE(wait_for([&] { return field(planned + ".reason", "over") == "MegatronCannotRun"; }, 60s))
      << field(".status", "over") << "\n"
      << events();
  EXPECT_NE(field(planned + ".message", "over").find("spec.worker.extraArgs sets --save,"), std::string::npos);
}

// The operator is SIGKILLed in the middle of a rescale (status says Rescaling: the new epoch is
// written, the pods are not all there) and started again: it resumes that rescale from
// status.plan instead of starting another, and the job finishes bit-identical.
TEST_F(LocalCluster, OperatorKilledMidRescaleResumesItOnce) {
  const auto up = up_state();
  const pid_t op = up.value("operatorPid", 0);
  ASSERT_GT(op, 0);
  const std::vector<std::string> argv = command_line_of(op);
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

// A status.plan edited by hand: its pods removed through the status subresource, which the CRD's
// schema lets pass (a wrong type it refuses). The operator says so once and rebuilds the plan from
// the pods' own plans, re-planned at once one epoch above theirs on the GPUs they hold; the
// workers go on and the loss log equals an uninterrupted run.
TEST_F(LocalCluster, AStatusPlanEditedByHandIsRebuiltFromThePodsAndStaysBitIdentical) {
  apply_job(300);
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.gpus") == "4" && field(".status.phase") == "Running"; }, 60s))
      << field(".status") << "\n"
      << events();
  const int epoch_before = std::atoi(field(".status.plan.epoch").c_str());
  const auto wrong_type =
      kubectl("patch tj demo --subresource=status --type=merge -p '{\"status\":{\"plan\":{\"epoch\":\"x\"}}}'");
  EXPECT_NE(wrong_type.exit_code, 0);
  EXPECT_NE(wrong_type.output.find("must be of type integer"), std::string::npos) << wrong_type.output;
  const auto removed = kubectl(
      "patch tj demo --subresource=status --type=json -p '[{\"op\":\"remove\",\"path\":\"/status/plan/pods\"}]'");
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  ASSERT_TRUE(wait_for([&] { return field(".status.plan.epoch") == std::to_string(epoch_before + 1); }, 30s))
      << field(".status") << "\n"
      << events();
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  EXPECT_EQ(event_count("PlanUnreadable", "demo"), 1) << events();
  EXPECT_EQ(field(".status.plan.epoch"), std::to_string(epoch_before + 1)) << "one re-plan, no more\n" << events();
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(300));
}

// Two nodes whose GPUs hold far less than the catalog says (something else holds 63 of their
// 64 MB: devcluster's gpu-memory-used-bytes annotation), beside a slower node that has room.
class OverstatedGpus : public LocalCluster {
 protected:
  std::string catalog_yaml() const override {
    return R"(gpus:
  emu-mem: {emulated: true, memory_bytes: 64000000, peak_bf16_tflops: 0.0015, compute_efficiency: 1,
            mem_bandwidth_bytes_per_s: 1e10, gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11,
            inter_node_bandwidth_bytes_per_s: 1e10, usd_per_hour: 1, runtime_overhead_bytes: 0}
  emu-roomy: {emulated: true, memory_bytes: 64000000, peak_bf16_tflops: 0.001, compute_efficiency: 1,
              mem_bandwidth_bytes_per_s: 1e10, gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11,
              inter_node_bandwidth_bytes_per_s: 1e10, usd_per_hour: 1, runtime_overhead_bytes: 0}
)";
  }
  std::string nodes_yaml() const override {
    return "nodes:\n  - {name: n0, gpuType: emu-mem, gpuCount: 2, zone: z}\n"
           "  - {name: n1, gpuType: emu-mem, gpuCount: 2, zone: z}\n"
           "  - {name: n2, gpuType: emu-roomy, gpuCount: 2, zone: z}\n";
  }
};

// The planner puts the whole model on each of the fast emu-mem GPUs (predicted 6 MB of 64 MB);
// its workers run out of memory, their line saying the GPU offered 1 MB. The job learns that an
// emu-mem rank may hold 0.9 MB (headroom 64 - 0.9 = 63.1 MB, memory_headroom.h), is re-planned
// at once with only what fits there on emu-mem, and finishes with the loss of an uninterrupted run.
TEST_F(OverstatedGpus, AWorkerOutOfMemoryIsLearnedAndTheJobReplannedAroundIt) {
  for (const char* node : {"n0", "n1"}) {
    auto r = kubectl(std::string("annotate node ") + node + " devcluster.flotilla.io/gpu-memory-used-bytes=63000000");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  apply_job(60, "demo", 0, "relaxed");
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 120s)) << field(".status") << "\n"
                                                                                     << events();
  const auto status = nlohmann::json::parse(field(""))["status"];
  ASSERT_EQ(status["memoryHeadroom"].size(), 1u) << status.dump();
  const auto& learned = status["memoryHeadroom"][0];
  EXPECT_EQ(learned.value("gpuType", ""), "emu-mem");
  EXPECT_EQ(learned.value("reason", ""), "OutOfMemory");
  EXPECT_EQ(learned.value("bytes", std::int64_t{0}), 64'000'000 - 900'000);
  EXPECT_NE(events().find("OutOfMemory"), std::string::npos) << events();
  // The plan that finished: what it asks of an emu-mem GPU, without the headroom, is at most 0.9 MB.
  for (const auto& pod : status["plan"]["pods"]) {
    if (pod.value("gpuType", "") != "emu-mem") continue;
    EXPECT_EQ(pod.value("headroomBytes", std::int64_t{0}), 63'100'000);
    EXPECT_LE(pod.value("predictedPeakBytes", std::int64_t{0}) - 63'100'000, 900'000) << pod.dump();
  }
  EXPECT_EQ(status["failures"].value("consecutive", 0), 1) << "one OOM, then the re-plan ran";
  // The operator counts it for the FlotillaWorkerOutOfMemory alert.
  const std::string metrics = operator_metrics(up_state());
  EXPECT_NE(metrics.find("\nflotilla_worker_out_of_memory_total 1\n"), std::string::npos) << metrics;
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(60)) << "the loss log differs from an uninterrupted run";
}
