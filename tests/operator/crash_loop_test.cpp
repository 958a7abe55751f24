// crash_loop.h: the streak of failures without progress, its backoff and its limit, on
// hand-written sequences of failures (numbers worked out by hand from base 1 s, doubling, 60 s cap).
#include "operator/crash_loop.h"

#include <gtest/gtest.h>

namespace fo = flotilla::op;

namespace {

const fo::BackoffPolicy kLimit3{3, 1, 60};

}  // namespace

TEST(CrashLoop, FailuresWithoutProgressBackOffOneTwoFourThenGiveUpOnTheFourth) {
  fo::FailureStreak s;
  const char* now = "2026-11-24T10:00:00Z";
  const std::int64_t waits[] = {1, 2, 4};
  const char* after[] = {"2026-11-24T10:00:01Z", "2026-11-24T10:00:02Z", "2026-11-24T10:00:04Z"};
  for (int k = 0; k < 3; ++k) {
    const fo::FailureVerdict v = fo::judge_failure(s, -1, "data file '/x' not found", now, kLimit3);
    EXPECT_FALSE(v.give_up) << "failure " << k + 1;
    EXPECT_EQ(v.streak.consecutive, k + 1);
    EXPECT_EQ(v.backoff_seconds, waits[k]);
    EXPECT_EQ(v.streak.restart_after, after[k]);
    s = v.streak;
  }
  const fo::FailureVerdict last = fo::judge_failure(s, -1, "data file '/x' not found", now, kLimit3);
  EXPECT_TRUE(last.give_up);
  EXPECT_EQ(last.streak.consecutive, 4);
  EXPECT_EQ(last.backoff_seconds, 0);
  const std::string message = fo::give_up_message(last, kLimit3);
  EXPECT_NE(message.find("4 times in a row"), std::string::npos) << message;
  EXPECT_NE(message.find("spec.backoffLimit 3"), std::string::npos) << message;
  EXPECT_NE(message.find("data file '/x' not found"), std::string::npos) << message;
  EXPECT_NE(message.find("re-apply"), std::string::npos) << message;
}

// A node killed at step 60, then at 90, then at 130: each failure follows new steps, so each
// starts a streak of one and the job is relaunched every time, after the first backoff only.
TEST(CrashLoop, AFailureAfterNewStepsOrACheckpointStartsTheStreakAgain) {
  fo::FailureStreak s;
  const std::int64_t marks[] = {60, 90, 130, 131, 400};
  for (std::int64_t mark : marks) {
    const fo::FailureVerdict v = fo::judge_failure(s, mark, "lost", "2026-11-24T10:00:00Z", kLimit3);
    EXPECT_FALSE(v.give_up);
    EXPECT_EQ(v.streak.consecutive, 1) << "mark " << mark;
    EXPECT_EQ(v.backoff_seconds, 1);
    s = v.streak;
  }
  // Then the same mark twice more: no progress in between, the streak grows.
  s = fo::judge_failure(s, 400, "again", "2026-11-24T10:00:00Z", kLimit3).streak;
  EXPECT_EQ(s.consecutive, 2);
  EXPECT_EQ(s.progress_mark, 400);
}

TEST(CrashLoop, BackoffIsCappedAndALimitOfZeroGivesUpOnTheFirstFailure) {
  fo::FailureStreak s;
  const fo::BackoffPolicy many{20, 1, 60};
  std::int64_t wait = 0;
  for (int k = 0; k < 9; ++k) {
    const fo::FailureVerdict v = fo::judge_failure(s, 5, "x", "2026-11-24T10:00:00Z", many);
    wait = v.backoff_seconds;
    s = v.streak;
  }
  EXPECT_EQ(wait, 60) << "the 9th failure would wait 2^8 = 256 s, capped at 60";
  EXPECT_EQ(s.restart_after, "2026-11-24T10:01:00Z");
  EXPECT_TRUE(fo::judge_failure({}, -1, "x", "2026-11-24T10:00:00Z", {0, 1, 60}).give_up);
}

// Times are whole seconds, and `now` may be up to a second late: the relaunch waits for the
// second after restartAfter, so it never comes sooner than the backoff.
TEST(CrashLoop, RestartIsDueOnlyPastRestartAfter) {
  fo::FailureStreak s;
  double wait_s = -1;
  EXPECT_TRUE(fo::restart_due(s, "2026-11-24T10:00:00Z", &wait_s)) << "no backoff pending";
  EXPECT_EQ(wait_s, 0);
  s.restart_after = "2026-11-24T10:00:04Z";
  EXPECT_FALSE(fo::restart_due(s, "2026-11-24T10:00:01Z", &wait_s));
  EXPECT_DOUBLE_EQ(wait_s, 4);
  EXPECT_FALSE(fo::restart_due(s, "2026-11-24T10:00:04Z", &wait_s));
  EXPECT_DOUBLE_EQ(wait_s, 1);
  EXPECT_TRUE(fo::restart_due(s, "2026-11-24T10:00:05Z", &wait_s));
}

TEST(CrashLoop, TheStreakRoundTripsThroughStatusAndAStatusWithoutOneIsEmpty) {
  const fo::FailureStreak none = fo::FailureStreak::from_status(nlohmann::json::object());
  EXPECT_EQ(none.consecutive, 0);
  EXPECT_EQ(none.progress_mark, -1);
  fo::FailureStreak s{2, 40, "2026-11-24T10:00:04Z", "pod-a: boom"};
  const nlohmann::json status = {{"failures", s.to_status()}};
  const fo::FailureStreak back = fo::FailureStreak::from_status(status);
  EXPECT_EQ(back.consecutive, 2);
  EXPECT_EQ(back.progress_mark, 40);
  EXPECT_EQ(back.restart_after, s.restart_after);
  EXPECT_EQ(back.last_message, s.last_message);
  EXPECT_EQ(fo::progress_mark({{"progress", {{"step", 12}, {"lastCheckpointStep", 20}}}}), 20);
  EXPECT_EQ(fo::progress_mark({{"progress", {{"step", 0}}}}), 0);
  EXPECT_EQ(fo::progress_mark(nlohmann::json::object()), -1);
}
