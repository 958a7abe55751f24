// A job whose workers keep failing: relaunch after an exponential backoff, or give up. The
// TrainingJob's answer to Kubernetes' CrashLoopBackOff and a Job's backoffLimit.
//
// What counts: a failure counts towards spec.backoffLimit only when the job made no training
// progress since the previous failure, i.e. its progress mark (the larger of status.progress.step
// and status.progress.lastCheckpointStep) did not grow. A failure after progress (a node or a
// worker killed mid-training) starts a new streak of one, so elastic recovery goes on for as long
// as training advances; a failure that repeats before any new step (a missing data file, a bad
// flag) exhausts the limit in a bounded time.
//
// Guarantees (pure: no I/O, no clock; times come in as RFC 3339 text):
//   - judge_failure(): the k-th failure of a streak waits min(base · 2^(k-1), max) seconds before
//     the next relaunch; the (backoffLimit + 1)-th gives up (backoffLimit 0: the first failure).
//   - The streak lives in status.failures (consecutive, progressMark, restartAfter, lastMessage),
//     so a restarted operator continues it; from_status() of a status without it is an empty
//     streak.
//   - restart_due() is true when the streak has no restartAfter or `now` (whole seconds, like
//     every status time) is past it, so a relaunch never comes sooner than its backoff.
// Assumes: the caller judges each failure once (the reconciler does so under the epoch it failed
//   in, then moves to the next epoch, so the other pods' reports of that failure are stale).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace flotilla::op {

// What a Failed condition tells the user to do once the cause is fixed.
inline constexpr const char* kFixThenReapply =
    "Fix the cause, then re-apply the changed spec (or delete and re-create the job) to start it again";

struct BackoffPolicy {
  int backoff_limit = 3;  // spec.backoffLimit: relaunches after failures without progress
  std::int64_t base_seconds = 1;
  std::int64_t max_seconds = 60;
};

struct FailureStreak {
  int consecutive = 0;              // failures in a row without progress
  std::int64_t progress_mark = -1;  // the job's progress mark at the last of them
  std::string restart_after;        // RFC 3339: the next relaunch not before (empty: now)
  std::string last_message;         // the newest failure's line (a worker's own error)

  static FailureStreak from_status(const nlohmann::json& status);
  nlohmann::json to_status() const;
};

struct FailureVerdict {
  FailureStreak streak;
  bool give_up = false;
  std::int64_t backoff_seconds = 0;  // before the relaunch (0 when giving up)
};

// The larger of progress.step and progress.lastCheckpointStep (-1: nothing yet).
std::int64_t progress_mark(const nlohmann::json& status);

// One new failure with `message`, seen at `now` with the job's progress mark `mark_now`.
FailureVerdict judge_failure(const FailureStreak& before, std::int64_t mark_now, const std::string& message,
                             const std::string& now, const BackoffPolicy& policy);

// Whether the relaunch the streak waits for may start at `now`; seconds left in *wait_seconds.
bool restart_due(const FailureStreak& streak, const std::string& now, double* wait_seconds);

// The Failed condition's message: how often, the limit, the worker's line, what to do.
std::string give_up_message(const FailureVerdict& verdict, const BackoffPolicy& policy);

}  // namespace flotilla::op
