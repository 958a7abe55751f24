#include "trainer-sidecar/supervisor.h"

#include <algorithm>
#include <utility>

#include "common/exponential_backoff.h"
#include "common/out_of_memory.h"

namespace flotilla::sidecar {
namespace {

using Actions = std::vector<Action>;

Action act(ActionKind kind) { return Action{kind, 0, 0}; }
Action exit_with(int code) { return Action{ActionKind::kExit, 0, code}; }

bool terminal(const SupervisorState& s) { return s.exited || s.phase == PodState::kSucceeded; }

// Idle (no workers) under the current epoch: start once the barrier is lifted.
void start_if_released(SupervisorState& s, Actions& out) {
  if (s.barrier == s.epoch && s.epoch > 0 && !s.shutting_down) {
    s.phase = PodState::kStarting;
    out.push_back(act(ActionKind::kRendezvous));
  }
}

SupervisorStep on_plan(SupervisorState s, const Input& in) {
  Actions out;
  if (in.epoch < s.epoch || s.shutting_down) return {s, out};
  if (in.epoch == s.epoch) {
    if (in.barrier == s.barrier) return {s, out};
    s.barrier = in.barrier;
    if (s.phase == PodState::kWaiting || s.phase == PodState::kStopped) {
      start_if_released(s, out);
      if (!out.empty()) out.push_back(act(ActionKind::kReport));
    }
    return {s, out};
  }
  // A new epoch: everything of the old one is void.
  s.epoch = in.epoch;
  s.barrier = in.barrier;
  s.local_world = in.local_world;
  s.restarts = 0;
  s.restart_pending = false;
  s.failure_seen = false;
  s.message.clear();
  if (s.workers_alive) {
    s.phase = PodState::kStopping;
    out.push_back(act(ActionKind::kStopWorkers));
  } else {
    // A pod that never ran stays Waiting; one that ran (or tried) has stopped.
    if (s.phase != PodState::kWaiting) s.phase = PodState::kStopped;
    start_if_released(s, out);
  }
  out.push_back(act(ActionKind::kReport));
  return {s, out};
}

std::int64_t backoff_ms(const SupervisorConfig& c, int restart) {
  return exponential_backoff(c.backoff_base_ms, c.backoff_max_ms, restart);
}

SupervisorStep on_failure(SupervisorState s, const Input& in, const SupervisorConfig& c) {
  Actions out;
  s.phase = PodState::kFailed;
  // Out of GPU memory: the plan asks more of this GPU than it offers, so the same plan restarted
  // here fails the same way; the operator re-plans with what the failure taught it.
  if (s.local_world && !is_out_of_memory(s.message)) {
    if (in.made_progress) s.restarts = 0;  // a failure after new steps starts the count again
    if (s.restarts < c.max_restarts) {
      ++s.restarts;
      s.phase = PodState::kStarting;
      s.restart_pending = true;
      out.push_back(act(ActionKind::kReport));
      out.push_back(Action{ActionKind::kScheduleRestart, backoff_ms(c, s.restarts), 0});
      return {s, out};
    }
    s.message = "gave up after " + std::to_string(s.restarts) + " restarts: " + s.message;
    s.exited = true;
    s.exit_code = 1;
    out.push_back(act(ActionKind::kReport));
    out.push_back(exit_with(1));
    return {s, out};
  }
  // Ranks in other pods, or a plan that does not fit: only the operator can restart the world
  // (a new epoch).
  if (in.before_first_step) s.phase = PodState::kDegraded;
  out.push_back(act(ActionKind::kReport));
  return {s, out};
}

SupervisorStep on_workers_exited(SupervisorState s, const Input& in, const SupervisorConfig& c) {
  Actions out;
  if (!s.workers_alive) return {s, out};
  s.workers_alive = false;
  const bool failed = s.failure_seen;
  s.failure_seen = false;
  if (s.phase == PodState::kStopping) {
    s.phase = PodState::kStopped;
    out.push_back(act(ActionKind::kReport));
    if (s.shutting_down) {
      s.exited = true;
      out.push_back(exit_with(0));
    } else {
      start_if_released(s, out);
    }
    return {s, out};
  }
  if (!failed && in.ok && in.reached_train_steps) {
    s.phase = PodState::kSucceeded;
    s.exited = true;
    out.push_back(act(ActionKind::kReport));
    out.push_back(exit_with(0));
    return {s, out};
  }
  if (!failed && s.message.empty())
    s.message = in.ok ? "workers exited 0 before the job's last step (stopped by someone else?)"
                      : "a worker failed";
  return on_failure(std::move(s), in, c);
}

}  // namespace

SupervisorStep step(const SupervisorState& state, const Input& in, const SupervisorConfig& c) {
  SupervisorState s = state;
  Actions out;
  if (terminal(s)) return {s, out};
  switch (in.kind) {
    case InputKind::kPlan:
      return on_plan(s, in);
    case InputKind::kRendezvousReady:
      if (s.phase != PodState::kStarting || in.epoch != s.epoch || s.workers_alive ||
          s.restart_pending)
        return {s, out};
      s.phase = PodState::kRunning;
      s.workers_alive = true;
      s.message.clear();
      out = {act(ActionKind::kSpawnWorkers), act(ActionKind::kReport)};
      return {s, out};
    case InputKind::kRendezvousTimedOut:
      if (s.phase != PodState::kStarting || in.epoch != s.epoch || s.workers_alive)
        return {s, out};
      s.phase = PodState::kDegraded;
      s.message = in.message;
      out = {act(ActionKind::kReport)};
      return {s, out};
    case InputKind::kWorkerFailed:
      if (!s.workers_alive || s.phase != PodState::kRunning || s.failure_seen) return {s, out};
      s.failure_seen = true;
      s.message = in.message;
      out = {act(ActionKind::kStopWorkers)};
      return {s, out};
    case InputKind::kWorkersExited:
      return on_workers_exited(s, in, c);
    case InputKind::kShutdown:
      if (s.shutting_down) return {s, out};
      s.shutting_down = true;
      s.restart_pending = false;
      if (s.workers_alive) {
        s.phase = PodState::kStopping;
        out = {act(ActionKind::kStopWorkers), act(ActionKind::kReport)};
      } else {
        s.phase = PodState::kStopped;
        s.exited = true;
        out = {act(ActionKind::kReport), exit_with(0)};
      }
      return {s, out};
    case InputKind::kRestartDue:
      if (!s.restart_pending || s.phase != PodState::kStarting) return {s, out};
      s.restart_pending = false;
      out = {act(ActionKind::kRendezvous)};
      return {s, out};
  }
  return {s, out};
}

Input plan_input(std::int64_t epoch, std::int64_t barrier, bool local_world) {
  Input in;
  in.kind = InputKind::kPlan;
  in.epoch = epoch;
  in.barrier = barrier;
  in.local_world = local_world;
  return in;
}
Input rendezvous_ready(std::int64_t epoch) {
  Input in;
  in.kind = InputKind::kRendezvousReady;
  in.epoch = epoch;
  return in;
}
Input rendezvous_timed_out(std::int64_t epoch, std::string message) {
  Input in;
  in.kind = InputKind::kRendezvousTimedOut;
  in.epoch = epoch;
  in.message = std::move(message);
  return in;
}
Input worker_failed(std::string message) {
  Input in;
  in.kind = InputKind::kWorkerFailed;
  in.message = std::move(message);
  return in;
}
Input workers_exited(bool ok, bool reached_train_steps, bool before_first_step, bool made_progress) {
  Input in;
  in.kind = InputKind::kWorkersExited;
  in.ok = ok;
  in.reached_train_steps = reached_train_steps;
  in.before_first_step = before_first_step;
  in.made_progress = made_progress;
  return in;
}
Input shutdown() {
  Input in;
  in.kind = InputKind::kShutdown;
  return in;
}
Input restart_due() {
  Input in;
  in.kind = InputKind::kRestartDue;
  return in;
}

}  // namespace flotilla::sidecar
