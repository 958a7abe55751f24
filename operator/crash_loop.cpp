#include "operator/crash_loop.h"

#include <algorithm>
#include <chrono>

#include "common/exponential_backoff.h"
#include "kube/clock.h"

namespace flotilla::op {

using Json = nlohmann::json;

FailureStreak FailureStreak::from_status(const Json& status) {
  const Json f = status.value("failures", Json::object());
  FailureStreak s;
  if (!f.is_object()) return s;
  s.consecutive = f.value("consecutive", 0);
  s.progress_mark = f.value("progressMark", std::int64_t{-1});
  s.restart_after = f.value("restartAfter", "");
  s.last_message = f.value("lastMessage", "");
  return s;
}

Json FailureStreak::to_status() const {
  Json j = {{"consecutive", consecutive}, {"progressMark", progress_mark}, {"lastMessage", last_message}};
  if (!restart_after.empty()) j["restartAfter"] = restart_after;
  return j;
}

std::int64_t progress_mark(const Json& status) {
  const Json progress = status.value("progress", Json::object());
  return std::max(progress.value("step", std::int64_t{-1}), progress.value("lastCheckpointStep", std::int64_t{-1}));
}

FailureVerdict judge_failure(const FailureStreak& before, std::int64_t mark_now, const std::string& message,
                             const std::string& now, const BackoffPolicy& policy) {
  FailureVerdict v;
  const bool progressed = before.consecutive == 0 || mark_now > before.progress_mark;
  v.streak.consecutive = progressed ? 1 : before.consecutive + 1;
  v.streak.progress_mark = mark_now;
  v.streak.last_message = message;
  v.give_up = v.streak.consecutive > policy.backoff_limit;
  if (!v.give_up) {
    v.backoff_seconds = exponential_backoff(policy.base_seconds, policy.max_seconds, v.streak.consecutive);
    v.streak.restart_after = kube::rfc3339_plus_seconds(now, v.backoff_seconds);
  }
  return v;
}

bool restart_due(const FailureStreak& streak, const std::string& now, double* wait_seconds) {
  *wait_seconds = 0;
  kube::Clock::wall_time_point at, t;
  if (streak.restart_after.empty() || !kube::parse_rfc3339(streak.restart_after, at) || !kube::parse_rfc3339(now, t))
    return true;
  // Whole seconds on both sides: `now` may be up to a second late, so the relaunch waits for the
  // second after restartAfter, never less than the backoff.
  if (t > at) return true;
  *wait_seconds = std::chrono::duration<double>(at - t).count() + 1;
  return false;
}

std::string give_up_message(const FailureVerdict& verdict, const BackoffPolicy& policy) {
  const int n = verdict.streak.consecutive;
  return "the workers failed " + std::to_string(n) + (n == 1 ? " time" : " times in a row") +
         " without training progress (spec.backoffLimit " + std::to_string(policy.backoff_limit) +
         "); last error: " + verdict.streak.last_message + ". " + kFixThenReapply;
}

}  // namespace flotilla::op
