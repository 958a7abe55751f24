// The sidecar's supervisor: a pure state machine over one pod's worker processes, in the style
// of kube/watcher_machine.h. The thin loop (sidecar_loop.h) turns what it sees (the plan
// annotation, the rendezvous, worker exits, SIGTERM, timers) into Inputs and carries out the
// Actions; this file does no I/O, reads no clock and starts nothing.
//
//   Waiting ──barrier==epoch──► Starting ──rendezvous ready──► Running ──all exit 0 at the end──► Succeeded
//      ▲                          │  ▲  rendezvous timed out       │ new epoch / SIGTERM
//      │                          │  └──► Degraded                 ▼
//      │                          └──── crash, local world ◄── Stopping ──workers exited──► Stopped ──barrier──► Starting
//      │                                (backoff, ≤ max restarts)        (SIGTERM: exit 0)
//   crash, ranks in other pods: Failed (or Degraded before the first step) until a new epoch.
//
// Guarantees:
//   - A plan of an older epoch, a rendezvous of another epoch and inputs that do not apply to
//     the current phase change nothing and produce no action (stale inputs are ignored).
//   - Workers are started only when barrier == epoch and the rendezvous of that epoch is ready;
//     they are never started twice for one attempt, and a new epoch or SIGTERM always stops
//     running workers first (kStopWorkers) and waits for their exit before anything else.
//   - Every state change emits kReport; terminal outcomes emit kExit (Succeeded 0, SIGTERM
//     after the workers stopped 0, local restarts exhausted 1).
//   - Local restarts (every rank of the world in this pod) happen at most max_restarts times in
//     a row without progress, per epoch, with exponential backoff (base · 2^(k-1), capped); an
//     attempt that completed a step beyond every earlier attempt (made_progress) starts the count
//     again, so a worker killed now and then mid-training is always restarted, while one that
//     fails the same way before any new step gives up after max_restarts. A worker out of GPU
//     memory (common/out_of_memory.h) is never restarted locally: the same plan would fail the
//     same way, so the pod reports Failed (Degraded before the first step) and waits for the
//     operator's next plan, as a world spanning pods does.
// Assumes: the loop feeds kWorkersExited exactly once per started attempt, after every worker
//   process of it has been reaped.
// Caveats: the message of a failure is whatever the loop passes (one line of a worker's log).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/pod_plan.h"

namespace flotilla::sidecar {

struct SupervisorConfig {
  int max_restarts = 3;
  std::int64_t backoff_base_ms = 200;
  std::int64_t backoff_max_ms = 5000;
};

struct SupervisorState {
  PodState phase = PodState::kWaiting;
  std::int64_t epoch = 0;    // the newest plan epoch seen (0: no plan yet)
  std::int64_t barrier = 0;  // the newest barrier seen for that epoch
  bool local_world = false;  // every rank of the world runs in this pod
  bool workers_alive = false;
  bool restart_pending = false;  // a local restart waits for its backoff
  bool shutting_down = false;    // SIGTERM received
  bool failure_seen = false;     // a worker failed in this attempt (not asked to stop)
  int restarts = 0;              // local restarts in a row without progress, under this epoch
  std::string message;           // why Failed/Degraded, or the last worker error
  bool exited = false;
  int exit_code = 0;
};

enum class InputKind {
  kPlan,                // epoch, barrier, local_world
  kRendezvousReady,     // epoch
  kRendezvousTimedOut,  // epoch, message
  kWorkerFailed,        // message: one worker exited non-zero while not asked to stop
  kWorkersExited,       // every worker reaped; ok, reached_train_steps, before_first_step, made_progress
  kShutdown,            // SIGTERM to the sidecar
  kRestartDue,          // the backoff of a local restart elapsed
};

struct Input {
  InputKind kind = InputKind::kPlan;
  std::int64_t epoch = 0;
  std::int64_t barrier = 0;
  bool local_world = false;
  bool ok = false;
  bool reached_train_steps = false;
  bool before_first_step = false;
  bool made_progress = false;  // the attempt completed a step beyond every earlier attempt's
  std::string message;
};

enum class ActionKind {
  kRendezvous,       // publish (rendezvous pod) or await the rendezvous of state.epoch
  kSpawnWorkers,     // start one worker per planned rank
  kStopWorkers,      // SIGTERM the workers (SIGKILL after the loop's grace)
  kReport,           // publish the report now
  kScheduleRestart,  // feed kRestartDue after delay_ms
  kExit,             // exit with exit_code after the report is out
};

struct Action {
  ActionKind kind = ActionKind::kReport;
  std::int64_t delay_ms = 0;
  int exit_code = 0;
  bool operator==(const Action&) const = default;
};

struct SupervisorStep {
  SupervisorState state;
  std::vector<Action> actions;
};

SupervisorStep step(const SupervisorState& state, const Input& input, const SupervisorConfig& config);

// Inputs, spelled out for the loop and the tests.
Input plan_input(std::int64_t epoch, std::int64_t barrier, bool local_world);
Input rendezvous_ready(std::int64_t epoch);
Input rendezvous_timed_out(std::int64_t epoch, std::string message);
Input worker_failed(std::string message);
Input workers_exited(bool ok, bool reached_train_steps, bool before_first_step, bool made_progress = false);
Input shutdown();
Input restart_due();

}  // namespace flotilla::sidecar
