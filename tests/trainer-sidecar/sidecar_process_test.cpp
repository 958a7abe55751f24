// The trainer sidecar end to end: real devcluster, real flotilla-sidecar pods, real worker
// ranks; the test plays the operator. Loss logs are compared byte for byte with an
// uninterrupted `flotilla-worker run` of the same job (model small, seed 1234, batch 4).
#include "tests/trainer-sidecar/sidecar_harness.h"

namespace flotilla::sidecar::testing {
namespace {

class Sidecar : public SidecarCluster {};

TEST_F(Sidecar, OnePodTwoRanksRunsToCompletionBitForBit) {
  const int steps = 8;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps));
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 50s)) << phase("p0");
  auto r = report("p0");
  EXPECT_EQ(r->step, steps);
  EXPECT_EQ(r->last_checkpoint_step, steps);
  EXPECT_GT(r->tokens_per_second, 0);
  EXPECT_EQ(r->stage_seconds.size(), 2u);
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
  EXPECT_TRUE(wait_until([&] { return phase("p0") == "Succeeded"; }, 10s)) << phase("p0");
}


TEST_F(Sidecar, TwoPodsRendezvousAndComplete) {
  const int steps = 8;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0}, steps));
  create_pod("p1", plan(2, {1}, steps));
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 50s)) << phase("p0");
  ASSERT_TRUE(reports("p1", 1, PodState::kSucceeded, 20s)) << phase("p1");
  EXPECT_EQ(loss(), ref);
  // p1 joined the address p0 published for epoch 1.
  auto pod = client_->get(kube::resources::pods, "default", "p0");
  auto rz = parse_rendezvous(pod->at("metadata").at("annotations").at(kRendezvousAnnotation).get<std::string>());
  ASSERT_TRUE(std::holds_alternative<Rendezvous>(rz));
  EXPECT_EQ(std::get<Rendezvous>(rz).epoch, 1);
}

// One planned rescale: epoch `to.epoch` with the barrier held, Stopped at S, barrier lifted,
// and the first step under the new epoch is step S (0-based), resumed from checkpoint S.
Json start_event(SidecarCluster& t, const std::string& pod, const std::string& file, int rank);

void rescale(Sidecar& t, const PodPlan& to, std::int64_t* stopped_at) {
  PodPlan held = to;
  held.barrier = to.epoch - 1;
  t.patch_plan("p0", held);
  ASSERT_TRUE(t.reports("p0", to.epoch, PodState::kStopped, 30s)) << t.phase("p0");
  auto r = t.report("p0");
  EXPECT_EQ(r->last_checkpoint_step, r->step) << "the stop checkpoints the last completed step";
  *stopped_at = r->step;
  t.patch_plan("p0", to);
  ASSERT_TRUE(wait_until([&] {
    auto now = t.report("p0");
    return now && now->epoch == to.epoch &&
           (now->step > *stopped_at || now->state == PodState::kSucceeded);
  }, 30s));
}

TEST_F(Sidecar, PlannedRescaleTwoToThreeToTwoLosesAndRepeatsNoStep) {
  const int steps = 120;  // long enough that both rescales land before the end on a fast machine
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps));
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= 3; }, 30s));
  std::int64_t s2 = 0, s3 = 0;
  PodPlan three = plan(3, {0, 1, 2}, steps, "p0", 2);
  three.partition = "0:1,1:4,4:6";
  rescale(*this, three, &s2);
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= s2 + 3; }, 30s));
  rescale(*this, plan(2, {0, 1}, steps, "p0", 3), &s3);
  ASSERT_TRUE(reports("p0", 3, PodState::kSucceeded, 40s)) << phase("p0");
  EXPECT_LT(s2, s3);
  EXPECT_LT(s3, steps) << "the job ended before the second rescale; make it longer";
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
  for (auto [epoch, from] : {std::pair<int, std::int64_t>{2, s2}, {3, s3}}) {
    auto starts = progress_events("p0", "progress-e" + std::to_string(epoch));
    ASSERT_FALSE(starts.empty());
    bool first_step_seen = false;
    for (const auto& j : starts) {
      if (j.value("event", "") == "start") EXPECT_EQ(j.value("resumed_from_step", -1), from);
      if (j.value("event", "") == "step" && !first_step_seen) {
        first_step_seen = true;
        EXPECT_EQ(j.value("step", -1), from) << "epoch " << epoch;
      }
    }
    EXPECT_TRUE(first_step_seen);
  }
}

Json start_event(SidecarCluster& t, const std::string& pod, const std::string& file, int rank) {
  for (auto& j : t.progress_events(pod, file))
    if (j.value("event", "") == "start" && j.value("rank", -1) == rank) return j;
  return nullptr;
}

TEST_F(Sidecar, WorkerKilledMidStepRestartsFromTheNewestCheckpoint) {
  const int steps = 40;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps));
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= 5; }, 30s));
  Json victim = start_event(*this, "p0", "progress-e1-a1", 1);
  ASSERT_FALSE(victim.is_null());
  const std::int64_t at_kill = report("p0")->step;
  ASSERT_EQ(::kill(static_cast<pid_t>(victim["pid"].get<long>()), SIGKILL), 0);
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 50s)) << phase("p0");
  EXPECT_EQ(report("p0")->restarts, 1);
  Json resumed = start_event(*this, "p0", "progress-e1-a2", 0);
  ASSERT_FALSE(resumed.is_null());
  const std::int64_t from = resumed["resumed_from_step"].get<std::int64_t>();
  EXPECT_EQ(from % 2, 0) << "a checkpoint step (every 2)";
  EXPECT_GE(from, at_kill - 2) << "at most the steps since the newest checkpoint are redone";
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
}

// --max-restarts bounds failures in a row without progress, not the crashes of a long run: a
// rank SIGKILLed three times, each time after its attempt passed every earlier step, is restarted
// each time under --max-restarts 1, and the run still equals the uninterrupted one.
TEST_F(Sidecar, RanksKilledAfterProgressAreRestartedBeyondMaxRestarts) {
  const int steps = 60;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps), 20, Json::array(), 30, {"--max-restarts", "1"});
  std::int64_t high = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= high + 4; }, 30s)) << attempt;
    Json victim = nullptr;
    ASSERT_TRUE(wait_until([&] {
      victim = start_event(*this, "p0", "progress-e1-a" + std::to_string(attempt), 1);
      return !victim.is_null();
    }, 10s));
    high = report("p0")->step;
    ASSERT_EQ(::kill(static_cast<pid_t>(victim["pid"].get<long>()), SIGKILL), 0);
  }
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 60s)) << phase("p0");
  EXPECT_EQ(report("p0")->restarts, 1) << "each restart followed new steps: the count started again";
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
}

TEST_F(Sidecar, KillDuringACheckpointWriteResumesFromThePreviousCompleteOne) {
  const int steps = 10;
  const std::string ref = reference_loss(steps);
  // Every writer pauses 3 s after its first unit file of the step-6 checkpoint.
  create_pod("p0", plan(2, {0, 1}, steps), 20, Json::array({{{"name", "FLOTILLA_TEST_CKPT_PAUSE"}, {"value", "6:1:3000"}}}));
  const fs::path torn = dir_ / "ck" / "step_00000006";
  ASSERT_TRUE(wait_until([&] { return fs::exists(torn / "unit_0000.bin"); }, 30s));
  ASSERT_FALSE(fs::exists(torn / "DONE"));
  Json writer = start_event(*this, "p0", "progress-e1-a1", 0);
  ASSERT_FALSE(writer.is_null());
  ASSERT_EQ(::kill(static_cast<pid_t>(writer["pid"].get<long>()), SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !start_event(*this, "p0", "progress-e1-a2", 0).is_null(); }, 20s));
  EXPECT_EQ(start_event(*this, "p0", "progress-e1-a2", 0)["resumed_from_step"], 4)
      << "the torn step-6 checkpoint has no DONE, so step 4 is the newest complete one";
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 40s)) << phase("p0");
  EXPECT_EQ(report("p0")->restarts, 1);
  EXPECT_EQ(loss(), ref);
}

TEST_F(Sidecar, ARankThatNeverJoinsIsDegradedWithinTheBound) {
  const double bound_s = 3;
  const auto t0 = std::chrono::steady_clock::now();
  // The plan names two pods; only these exist. p0 holds rank 0 and publishes the rendezvous,
  // its rank waits for rank 1, which no pod runs; q1 waits for a rendezvous pod that is absent.
  create_pod("p0", plan(2, {0}, 20, "p0"), bound_s);
  PodPlan orphan = plan(2, {1}, 20, "ghost");
  orphan.checkpoint_dir = (dir_ / "ck-q").string();
  orphan.loss_log.clear();
  create_pod("q1", orphan, bound_s);
  ASSERT_TRUE(reports("p0", 1, PodState::kDegraded, 20s)) << phase("p0");
  ASSERT_TRUE(reports("q1", 1, PodState::kDegraded, 20s)) << phase("q1");
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took_s, bound_s + 7) << "Degraded comes within the bound plus start-up";
  EXPECT_FALSE(report("p0")->message.empty());
  EXPECT_NE(report("q1")->message.find("ghost"), std::string::npos) << report("q1")->message;
  EXPECT_EQ(report("p0")->message.find('\n'), std::string::npos);
  std::fprintf(stderr, "degraded after %.2f s: p0 '%s'; q1 '%s'\n", took_s, report("p0")->message.c_str(),
               report("q1")->message.c_str());
}

TEST_F(Sidecar, PodDeletionCheckpointsAndExitsZeroWithinTheGracePeriod) {
  const int steps = 100000;
  create_pod("p0", plan(2, {0, 1}, steps), 20, Json::array(), 20);
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= 3; }, 30s));
  const auto t0 = std::chrono::steady_clock::now();
  auto del = client_->remove(kube::resources::pods, "default", "p0");
  ASSERT_TRUE(del.ok()) << del.error().describe();
  ASSERT_TRUE(wait_until([&] { return phase("p0") == "<gone>"; }, 25s));
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took_s, 20) << "gone within the 20 s grace period, so nobody was SIGKILLed";
  std::fprintf(stderr, "pod gone %.2f s after deletion\n", took_s);
  const std::string events = slurp(work("p0") / "sidecar-events.jsonl");
  EXPECT_NE(events.find(R"("code":0,"epoch":1,"event":"exit")"), std::string::npos) << events;
  EXPECT_NE(events.find(R"("event":"report","state":"Stopped")"), std::string::npos) << events;
  // The stop checkpointed the last completed step: complete, and the loss log ends there.
  std::int64_t newest = -1;
  for (const auto& e : fs::directory_iterator(dir_ / "ck"))
    if (e.path().filename().string().rfind("step_", 0) == 0 && fs::exists(e.path() / "DONE"))
      newest = std::max<std::int64_t>(newest, std::stoll(e.path().filename().string().substr(5)));
  EXPECT_EQ(newest, count_lines(dir_ / "loss.txt"));
  EXPECT_GE(newest, 3);
}

TEST_F(Sidecar, CrashInATwoPodWorldIsFailedUntilTheOperatorBumpsTheEpoch) {
  const int steps = 40;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0}, steps));
  create_pod("p1", plan(2, {1}, steps));
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= 4; }, 30s));
  Json victim = start_event(*this, "p1", "progress-e1-a1", 1);
  ASSERT_FALSE(victim.is_null());
  ASSERT_EQ(::kill(static_cast<pid_t>(victim["pid"].get<long>()), SIGKILL), 0);
  // Neither pod can restart the world alone: both report Failed for epoch 1 and wait.
  ASSERT_TRUE(reports("p1", 1, PodState::kFailed, 20s)) << phase("p1");
  ASSERT_TRUE(reports("p0", 1, PodState::kFailed, 20s)) << phase("p0");
  EXPECT_FALSE(report("p1")->message.empty());
  // The operator bumps the epoch (same layout), waits for Stopped, lifts the barrier.
  PodPlan a = plan(2, {0}, steps, "p0", 2), b = plan(2, {1}, steps, "p0", 2);
  a.barrier = b.barrier = 1;
  patch_plan("p0", a);
  patch_plan("p1", b);
  ASSERT_TRUE(reports("p0", 2, PodState::kStopped, 20s));
  ASSERT_TRUE(reports("p1", 2, PodState::kStopped, 20s));
  a.barrier = b.barrier = 2;
  // p1 first: p0's rendezvous annotation still names epoch 1, which p1 must not use.
  patch_plan("p1", b);
  ASSERT_TRUE(reports("p1", 2, PodState::kStarting, 10s));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(report("p1")->state, PodState::kStarting) << "started on epoch 1's rendezvous";
  EXPECT_TRUE(progress_events("p1", "progress-e2").empty());
  patch_plan("p0", a);
  ASSERT_TRUE(reports("p0", 2, PodState::kSucceeded, 50s)) << phase("p0");
  ASSERT_TRUE(reports("p1", 2, PodState::kSucceeded, 20s)) << phase("p1");
  EXPECT_EQ(loss(), ref);
}

TEST_F(Sidecar, APlanOfAnOlderEpochIsIgnored) {
  PodPlan held = plan(2, {0, 1}, 8, "p0", 5);
  held.barrier = 4;
  create_pod("p0", held);
  ASSERT_TRUE(reports("p0", 5, PodState::kWaiting, 20s));
  patch_plan("p0", plan(2, {0, 1}, 8, "p0", 3));  // stale, and its barrier is lifted
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(report("p0")->epoch, 5);
  EXPECT_EQ(report("p0")->state, PodState::kWaiting);
  EXPECT_FALSE(fs::exists(work("p0") / "rank-0.log")) << "no worker started for the stale plan";
}

TEST_F(Sidecar, GivesUpAfterMaxRestartsAndExitsNonZero) {
  PodPlan broken = plan(2, {0, 1}, 8);
  broken.data_path = (dir_ / "no-such-corpus.txt").string();  // every attempt fails at once
  create_pod("p0", broken, 20, Json::array(), 30, {"--max-restarts", "2"});
  ASSERT_TRUE(reports("p0", 1, PodState::kFailed, 30s)) << phase("p0");
  auto r = report("p0");
  EXPECT_EQ(r->restarts, 2);
  EXPECT_EQ(r->message.rfind("gave up after 2 restarts: ", 0), 0u) << r->message;
  EXPECT_NE(r->message.find("no-such-corpus"), std::string::npos) << r->message;
  EXPECT_TRUE(wait_until([&] { return phase("p0") == "Failed"; }, 10s)) << phase("p0");
}

// Worker kind megatron is checked up to the exec of torchrun (no PyTorch or GPU here): the pod's
// PATH holds no torchrun, so the real spawn path fails, and the report says what the image
// lacks in one line; the event stream records the argv it tried, whose master address and port
// must be the ones the pod published as the epoch's rendezvous.
class SidecarMegatron : public SidecarCluster {
 public:
  // PP2 · DP1 · TP2 (world 4), one pod holding all four ranks.
  PodPlan megatron_plan(const std::string& script) const {
    PodPlan p = plan(2, {0, 1, 2, 3}, 8);
    p.worker_kind = "megatron";
    p.tp = 2;
    p.world_size = 4;
    // clang-format off: flag, value pairs
    p.megatron_args = {script, "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                       "--seq-length", "32", "--save", (dir_ / "ck").string(), "--load", (dir_ / "ck").string()};
    // clang-format on
    return p;
  }
  // An existing folder with no torchrun, as the pod's PATH.
  Json path_without_torchrun() const {
    fs::create_directories(dir_ / "empty-bin");
    return Json::array({{{"name", "PATH"}, {"value", (dir_ / "empty-bin").string()}}});
  }
  // Pod p0 runs `script` with no torchrun on its PATH and no local restarts: its Failed line.
  std::string failure_of(const std::string& script) {
    create_pod("p0", megatron_plan(script), 20, path_without_torchrun(), 30, {"--max-restarts", "0"});
    if (!reports("p0", 1, PodState::kFailed, 20s)) {
      ADD_FAILURE() << "p0 did not report Failed: " << phase("p0");
      return "";
    }
    return report("p0")->message;
  }
  std::optional<Json> event(const std::string& pod, const std::string& name) const {
    std::ifstream in(work(pod) / "sidecar-events.jsonl");
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == name) return j;
    }
    return std::nullopt;
  }
};

fs::path megatron_snapshot() {
  if (const char* env = std::getenv("FLOTILLA_MEGATRON_DIR"); env != nullptr && *env != '\0') return env;
  return fs::path(FLOTILLA_SOURCE_DIR) / ".." / "shared" / "vendor" / "megatron-lm";
}

TEST_F(SidecarMegatron, WithoutTorchrunThePodFailsWithOneLineAndRecordsTheArgvItWouldExec) {
  const fs::path script = megatron_snapshot() / "pretrain_gpt.py";
  if (!fs::exists(script))
    GTEST_SKIP() << "Megatron-LM snapshot not found at " << megatron_snapshot()
                 << " (set FLOTILLA_MEGATRON_DIR; shared/vendor/megatron-lm/SNAPSHOT.md): its real pretrain_gpt.py "
                    "is the script the pod is given";
  const std::string message = failure_of(fs::weakly_canonical(script).string());
  EXPECT_NE(message.find("torchrun not found in PATH: the megatron worker kind needs an image with Megatron-LM and "
                         "PyTorch"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;

  auto pod = client_->get(kube::resources::pods, "default", "p0");
  ASSERT_TRUE(pod.ok());
  auto rdv = parse_rendezvous(
      pod->value("/metadata/annotations"_json_pointer, Json::object()).value(kRendezvousAnnotation, std::string()));
  ASSERT_TRUE(std::holds_alternative<Rendezvous>(rdv)) << std::get<std::string>(rdv);
  const Rendezvous r = std::get<Rendezvous>(rdv);
  const auto exec = event("p0", "megatron_exec");
  ASSERT_TRUE(exec) << slurp(work("p0") / "sidecar-events.jsonl");
  // clang-format off: flag, value pairs
  std::vector<std::string> want = {"torchrun", "--nnodes", "1", "--node-rank", "0", "--nproc-per-node", "4",
                                   "--rdzv-backend", "static", "--master-addr", r.addr, "--master-port",
                                   std::to_string(r.port)};
  // clang-format on
  const auto args = megatron_plan(fs::weakly_canonical(script).string()).megatron_args;
  want.insert(want.end(), args.begin(), args.end());
  EXPECT_EQ(exec->at("argv").get<std::vector<std::string>>(), want);
  EXPECT_EQ(exec->at("env").value("CUDA_DEVICE_MAX_CONNECTIONS", ""), "1");  // TP 2
  EXPECT_FALSE(event("p0", "spawned"));
  EXPECT_TRUE(wait_until([&] { return phase("p0") == "Failed"; }, 10s)) << phase("p0");
}

TEST_F(SidecarMegatron, AScriptMissingFromTheImageIsFailedWithOneLine) {
  const std::string message = failure_of("/no/such/megatron-lm/pretrain_gpt.py");
  EXPECT_NE(message.find("the Megatron-LM script '/no/such/megatron-lm/pretrain_gpt.py' is not in this image: the "
                         "megatron worker kind needs an image with Megatron-LM and PyTorch"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace flotilla::sidecar::testing
