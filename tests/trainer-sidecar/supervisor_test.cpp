// The supervisor state machine, driven by hand-written input sequences: each test is one
// story of a pod (start, rescale, crash, shutdown, stale inputs) with the phase and actions
// expected after every input.
#include <gtest/gtest.h>

#include "trainer-sidecar/supervisor.h"

namespace flotilla::sidecar {
namespace {

using K = ActionKind;

class Driver {
 public:
  explicit Driver(SupervisorConfig c = {}) : c_(c) {}
  std::vector<K> feed(const Input& in) {
    auto s = step(st_, in, c_);
    st_ = s.state;
    last_ = s.actions;
    std::vector<K> kinds;
    for (const auto& a : s.actions) kinds.push_back(a.kind);
    return kinds;
  }
  const SupervisorState& state() const { return st_; }
  const std::vector<Action>& actions() const { return last_; }

 private:
  SupervisorConfig c_;
  SupervisorState st_;
  std::vector<Action> last_;
};

using Kinds = std::vector<K>;

// Epoch 1 with the barrier lifted, rendezvous ready, workers running.
void run_epoch_one(Driver& d, bool local) {
  ASSERT_EQ(d.feed(plan_input(1, 1, local)), (Kinds{K::kRendezvous, K::kReport}));
  ASSERT_EQ(d.state().phase, PodState::kStarting);
  ASSERT_EQ(d.feed(rendezvous_ready(1)), (Kinds{K::kSpawnWorkers, K::kReport}));
  ASSERT_EQ(d.state().phase, PodState::kRunning);
  ASSERT_TRUE(d.state().workers_alive);
}

// Restart limits with a 100 ms backoff base.
SupervisorConfig restarting(int max_restarts) {
  SupervisorConfig c;
  c.max_restarts = max_restarts;
  c.backoff_base_ms = 100;
  return c;
}

TEST(SidecarSupervisor, WaitsForTheBarrierThenRunsToSuccess) {
  Driver d;
  EXPECT_EQ(d.feed(plan_input(1, 0, true)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kWaiting);
  EXPECT_EQ(d.state().epoch, 1);
  EXPECT_EQ(d.feed(rendezvous_ready(1)), Kinds{});  // not Starting: ignored
  EXPECT_EQ(d.feed(plan_input(1, 0, true)), Kinds{});  // same plan again: nothing
  EXPECT_EQ(d.feed(plan_input(1, 1, true)), (Kinds{K::kRendezvous, K::kReport}));
  EXPECT_EQ(d.state().phase, PodState::kStarting);
  EXPECT_EQ(d.feed(rendezvous_ready(1)), (Kinds{K::kSpawnWorkers, K::kReport}));
  EXPECT_EQ(d.feed(rendezvous_ready(1)), Kinds{});  // never spawned twice
  EXPECT_EQ(d.feed(workers_exited(true, true, false)), (Kinds{K::kReport, K::kExit}));
  EXPECT_EQ(d.state().phase, PodState::kSucceeded);
  EXPECT_EQ(d.actions().back().exit_code, 0);
  // Terminal: nothing moves it any more.
  EXPECT_EQ(d.feed(plan_input(2, 2, true)), Kinds{});
  EXPECT_EQ(d.feed(shutdown()), Kinds{});
}

TEST(SidecarSupervisor, NewEpochStopsWorkersReportsStoppedAndRestartsAtTheBarrier) {
  Driver d;
  run_epoch_one(d, true);
  EXPECT_EQ(d.feed(plan_input(2, 1, true)), (Kinds{K::kStopWorkers, K::kReport}));
  EXPECT_EQ(d.state().phase, PodState::kStopping);
  EXPECT_EQ(d.state().epoch, 2);
  EXPECT_EQ(d.feed(plan_input(2, 2, true)), Kinds{});  // barrier early: still stopping
  EXPECT_EQ(d.feed(workers_exited(true, false, false)), (Kinds{K::kReport, K::kRendezvous}));
  EXPECT_EQ(d.state().phase, PodState::kStarting);  // barrier already lifted
  EXPECT_EQ(d.feed(rendezvous_ready(1)), Kinds{});  // old epoch's rendezvous: ignored
  EXPECT_EQ(d.feed(rendezvous_ready(2)), (Kinds{K::kSpawnWorkers, K::kReport}));
}

TEST(SidecarSupervisor, StoppedWaitsForTheBarrierOfTheNewEpoch) {
  Driver d;
  run_epoch_one(d, false);
  d.feed(plan_input(2, 1, false));
  EXPECT_EQ(d.feed(workers_exited(true, false, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kStopped);
  EXPECT_EQ(d.feed(plan_input(1, 1, false)), Kinds{});  // stale plan: ignored
  EXPECT_EQ(d.state().epoch, 2);
  EXPECT_EQ(d.feed(plan_input(2, 2, false)), (Kinds{K::kRendezvous, K::kReport}));
}

TEST(SidecarSupervisor, EpochJumpWhileStoppingKeepsStoppingUnderTheNewest) {
  Driver d;
  run_epoch_one(d, true);
  d.feed(plan_input(2, 1, true));
  EXPECT_EQ(d.feed(plan_input(3, 1, true)), (Kinds{K::kStopWorkers, K::kReport}));
  EXPECT_EQ(d.state().epoch, 3);
  EXPECT_EQ(d.feed(workers_exited(true, false, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kStopped);
}

TEST(SidecarSupervisor, LocalCrashRestartsWithBackoffThenGivesUp) {
  Driver d(restarting(2));
  run_epoch_one(d, true);
  for (int k = 1; k <= 2; ++k) {
    EXPECT_EQ(d.feed(worker_failed("rank 1 died")), Kinds{K::kStopWorkers});
    EXPECT_EQ(d.feed(worker_failed("rank 0 lost rank 1")), Kinds{});  // first failure only
    EXPECT_EQ(d.feed(workers_exited(false, false, false)), (Kinds{K::kReport, K::kScheduleRestart}));
    EXPECT_EQ(d.actions()[1].delay_ms, 100 << (k - 1));
    EXPECT_EQ(d.state().phase, PodState::kStarting);
    EXPECT_EQ(d.state().restarts, k);
    EXPECT_EQ(d.feed(rendezvous_ready(1)), Kinds{});  // backoff not over
    EXPECT_EQ(d.feed(restart_due()), Kinds{K::kRendezvous});
    EXPECT_EQ(d.feed(rendezvous_ready(1)), (Kinds{K::kSpawnWorkers, K::kReport}));
  }
  d.feed(worker_failed("rank 1 died again"));
  EXPECT_EQ(d.feed(workers_exited(false, false, false)), (Kinds{K::kReport, K::kExit}));
  EXPECT_EQ(d.state().phase, PodState::kFailed);
  EXPECT_EQ(d.actions().back().exit_code, 1);
  EXPECT_EQ(d.state().message, "gave up after 2 restarts: rank 1 died again");
}

// A worker killed now and then mid-training (each attempt got past every earlier step) is
// restarted every time, from the first backoff; the same failure before any new step gives up
// after max_restarts in a row.
TEST(SidecarSupervisor, LocalFailuresAfterProgressRestartEveryTimeWithoutProgressGiveUp) {
  Driver d(restarting(2));
  run_epoch_one(d, true);
  for (int k = 1; k <= 5; ++k) {
    d.feed(worker_failed("rank 0 killed by signal 9"));
    EXPECT_EQ(d.feed(workers_exited(false, false, false, true)), (Kinds{K::kReport, K::kScheduleRestart}));
    EXPECT_EQ(d.actions()[1].delay_ms, 100) << "failure " << k << " after progress: the first backoff";
    EXPECT_EQ(d.state().restarts, 1);
    d.feed(restart_due());
    ASSERT_EQ(d.feed(rendezvous_ready(1)), (Kinds{K::kSpawnWorkers, K::kReport}));
  }
  for (int k = 2; k <= 3; ++k) {
    d.feed(worker_failed("data file '/x' not found"));
    const Kinds kinds = d.feed(workers_exited(false, false, true, false));
    if (k == 2) {
      EXPECT_EQ(kinds, (Kinds{K::kReport, K::kScheduleRestart}));
      EXPECT_EQ(d.actions()[1].delay_ms, 200);
      d.feed(restart_due());
      d.feed(rendezvous_ready(1));
    } else {
      EXPECT_EQ(kinds, (Kinds{K::kReport, K::kExit}));
    }
  }
  EXPECT_EQ(d.state().message, "gave up after 2 restarts: data file '/x' not found");
}

TEST(SidecarSupervisor, BackoffIsCapped) {
  SupervisorConfig c;
  c.max_restarts = 10;
  c.backoff_base_ms = 1000;
  c.backoff_max_ms = 3000;
  Driver d(c);
  run_epoch_one(d, true);
  std::vector<std::int64_t> delays;
  for (int k = 0; k < 4; ++k) {
    d.feed(worker_failed("x"));
    d.feed(workers_exited(false, false, false));
    delays.push_back(d.actions()[1].delay_ms);
    d.feed(restart_due());
    d.feed(rendezvous_ready(1));
  }
  EXPECT_EQ(delays, (std::vector<std::int64_t>{1000, 2000, 3000, 3000}));
}

TEST(SidecarSupervisor, CrashWithRanksElsewhereReportsFailedAndWaitsForANewEpoch) {
  Driver d;
  run_epoch_one(d, false);
  d.feed(worker_failed("local rank 0: peer closed"));
  EXPECT_EQ(d.feed(workers_exited(false, false, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kFailed);
  EXPECT_EQ(d.state().message, "local rank 0: peer closed");
  EXPECT_FALSE(d.state().exited);
  EXPECT_EQ(d.feed(restart_due()), Kinds{});
  // The operator bumps the epoch (same layout): report Stopped, start at the barrier.
  EXPECT_EQ(d.feed(plan_input(2, 1, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kStopped);
  EXPECT_TRUE(d.state().message.empty());
  EXPECT_EQ(d.feed(plan_input(2, 2, false)), (Kinds{K::kRendezvous, K::kReport}));
}

// A world in one pod whose worker ran out of GPU memory is not restarted locally (the same plan
// would fail the same way): the pod reports the failure at once, with no restart counted, and
// waits for the operator's next plan like a world spanning pods.
TEST(SidecarSupervisor, OutOfGpuMemoryInAOnePodWorldIsHandedToTheOperator) {
  Driver d(restarting(3));
  run_epoch_one(d, true);
  d.feed(worker_failed("flotilla-worker rank 0: error: out of GPU memory in the forward pass; usable GPU memory 1 bytes"));
  EXPECT_EQ(d.feed(workers_exited(false, false, true)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kDegraded);
  EXPECT_EQ(d.state().restarts, 0);
  EXPECT_FALSE(d.state().exited);
  EXPECT_EQ(d.feed(restart_due()), Kinds{});
  EXPECT_EQ(d.feed(plan_input(2, 1, true)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kStopped);
  // Out of host memory is a crash like any other: restarted locally.
  Driver e(restarting(3));
  run_epoch_one(e, true);
  e.feed(worker_failed("out of host memory: could not allocate 1.00 GiB"));
  EXPECT_EQ(e.feed(workers_exited(false, false, true)), (Kinds{K::kReport, K::kScheduleRestart}));
}

TEST(SidecarSupervisor, FailureBeforeTheFirstStepOfAMultiPodWorldIsDegraded) {
  Driver d;
  run_epoch_one(d, false);
  d.feed(worker_failed("rank 0: timed out waiting for rank 1 to connect"));
  EXPECT_EQ(d.feed(workers_exited(false, false, true)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kDegraded);
}

TEST(SidecarSupervisor, RendezvousTimeoutIsDegradedAndOnlyForTheCurrentEpoch) {
  Driver d;
  d.feed(plan_input(2, 2, false));
  EXPECT_EQ(d.feed(rendezvous_timed_out(1, "old")), Kinds{});
  EXPECT_EQ(d.feed(rendezvous_timed_out(2, "pod p-1 did not publish")), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kDegraded);
  EXPECT_EQ(d.state().message, "pod p-1 did not publish");
  EXPECT_EQ(d.feed(rendezvous_ready(2)), Kinds{});  // too late: wait for a new epoch
  EXPECT_EQ(d.feed(plan_input(3, 3, false)), (Kinds{K::kRendezvous, K::kReport}));
}

TEST(SidecarSupervisor, ShutdownStopsWorkersThenExitsZero) {
  Driver d;
  run_epoch_one(d, true);
  EXPECT_EQ(d.feed(shutdown()), (Kinds{K::kStopWorkers, K::kReport}));
  EXPECT_EQ(d.state().phase, PodState::kStopping);
  EXPECT_EQ(d.feed(shutdown()), Kinds{});
  EXPECT_EQ(d.feed(plan_input(2, 2, true)), Kinds{});  // no new work while shutting down
  EXPECT_EQ(d.feed(workers_exited(true, false, false)), (Kinds{K::kReport, K::kExit}));
  EXPECT_EQ(d.state().phase, PodState::kStopped);
  EXPECT_EQ(d.actions().back().exit_code, 0);
}

TEST(SidecarSupervisor, ShutdownWithoutWorkersExitsAtOnce) {
  Driver d;
  d.feed(plan_input(1, 0, true));
  EXPECT_EQ(d.feed(shutdown()), (Kinds{K::kReport, K::kExit}));
  EXPECT_EQ(d.state().phase, PodState::kStopped);
}

TEST(SidecarSupervisor, ShutdownDuringRestartBackoffCancelsTheRestart) {
  Driver d;
  run_epoch_one(d, true);
  d.feed(worker_failed("x"));
  d.feed(workers_exited(false, false, false));
  EXPECT_EQ(d.feed(shutdown()), (Kinds{K::kReport, K::kExit}));
  EXPECT_EQ(d.feed(restart_due()), Kinds{});
}

TEST(SidecarSupervisor, WorkersExitingZeroBeforeTheEndIsAFailure) {
  Driver d;
  run_epoch_one(d, false);
  EXPECT_EQ(d.feed(workers_exited(true, false, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kFailed);
  EXPECT_NE(d.state().message.find("before the job's last step"), std::string::npos);
}

TEST(SidecarSupervisor, NewEpochDuringRendezvousWaitStartsOver) {
  Driver d;
  d.feed(plan_input(1, 1, false));
  EXPECT_EQ(d.state().phase, PodState::kStarting);
  EXPECT_EQ(d.feed(plan_input(2, 1, false)), Kinds{K::kReport});
  EXPECT_EQ(d.state().phase, PodState::kStopped);
  EXPECT_EQ(d.feed(rendezvous_ready(1)), Kinds{});
  EXPECT_EQ(d.feed(plan_input(2, 2, false)), (Kinds{K::kRendezvous, K::kReport}));
}

TEST(SidecarSupervisor, StrayWorkerInputsWithoutWorkersAreIgnored) {
  Driver d;
  EXPECT_EQ(d.feed(worker_failed("x")), Kinds{});
  EXPECT_EQ(d.feed(workers_exited(false, false, false)), Kinds{});
  EXPECT_EQ(d.feed(restart_due()), Kinds{});
  EXPECT_EQ(d.state().phase, PodState::kWaiting);
  EXPECT_EQ(d.state().epoch, 0);
}

}  // namespace
}  // namespace flotilla::sidecar
