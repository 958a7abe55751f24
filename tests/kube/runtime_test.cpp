// Unit tests for the small pure pieces: errors, clock formatting, backoff, retry, events,
// leader-election timing rules and lease decisions.
#include <gtest/gtest.h>

#include "kube/backoff.h"
#include "kube/clock.h"
#include "kube/error.h"
#include "kube/event_recorder.h"
#include "kube/leader_election.h"
#include "kube/retry.h"

namespace flotilla::kube {
namespace {

using namespace std::chrono_literals;

TEST(KubeErrors, StatusBodiesMapToKinds) {
  auto invalid = error_from_response(422, R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"TrainingJob \"x\" is invalid","reason":"Invalid","code":422,
    "details":{"causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.model"}]}})");
  EXPECT_EQ(invalid.kind, ErrorKind::Invalid);
  ASSERT_EQ(invalid.causes.size(), 1u);
  EXPECT_EQ(invalid.causes[0].field, "spec.model");
  EXPECT_NE(invalid.describe().find("spec.model: Required value"), std::string::npos);

  EXPECT_EQ(error_from_response(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})").kind,
            ErrorKind::AlreadyExists);
  EXPECT_EQ(error_from_response(409, R"({"kind":"Status","reason":"Conflict","code":409})").kind,
            ErrorKind::Conflict);
  EXPECT_EQ(error_from_response(410, R"({"kind":"Status","reason":"Expired","code":410})").kind,
            ErrorKind::Gone);
  EXPECT_EQ(error_from_response(404, "").kind, ErrorKind::NotFound);
  EXPECT_EQ(error_from_response(401, "").kind, ErrorKind::Unauthorized);
  EXPECT_EQ(error_from_response(403, "").kind, ErrorKind::Forbidden);
  EXPECT_EQ(error_from_response(400, "").kind, ErrorKind::BadRequest);
  auto busy = error_from_response(429, R"({"kind":"Status","code":429,"details":{"retryAfterSeconds":3}})");
  EXPECT_TRUE(busy.transient());
  EXPECT_EQ(busy.retry_after, std::chrono::seconds(3));
  auto oops = error_from_response(503, "upstream down");
  EXPECT_TRUE(oops.transient());
  EXPECT_EQ(oops.message, "upstream down");
  EXPECT_TRUE(transport_error("connection refused").transient());
}

TEST(KubeErrors, ResultValueThrowsTheError) {
  Result<int> bad = error_from_response(404, "");
  EXPECT_TRUE(bad.is(ErrorKind::NotFound));
  EXPECT_THROW(bad.value(), ApiException);
  Result<int> good = 3;
  EXPECT_EQ(*good, 3);
}

TEST(KubeClock, Rfc3339RoundTrip) {
  ManualClock clock;
  EXPECT_EQ(format_rfc3339(clock.wall_now()), "2026-01-01T00:00:00Z");
  clock.advance(1500ms);
  EXPECT_EQ(format_rfc3339_micro(clock.wall_now()), "2026-01-01T00:00:01.500000Z");
  Clock::wall_time_point parsed;
  ASSERT_TRUE(parse_rfc3339("2026-01-01T00:00:01.500000Z", parsed));
  EXPECT_EQ(parsed, clock.wall_now());
  ASSERT_TRUE(parse_rfc3339("2026-01-01T01:00:01.5+01:00", parsed));
  EXPECT_EQ(parsed, clock.wall_now());
  EXPECT_FALSE(parse_rfc3339("yesterday", parsed));
}

// 1767225600 s is 2026-01-01T00:00:00Z (date -d 2026-01-01T00:00:00Z +%s).
TEST(KubeClock, Rfc3339SecondsAndSums) {
  EXPECT_EQ(rfc3339_seconds("2026-01-01T00:00:00Z"), 1767225600.0);
  EXPECT_EQ(rfc3339_seconds("2026-01-01T01:00:01.5+01:00"), 1767225601.5);
  EXPECT_FALSE(rfc3339_seconds("yesterday"));
  EXPECT_EQ(rfc3339_plus_seconds("2026-12-31T23:50:00Z", 600), "2027-01-01T00:00:00Z");
  EXPECT_EQ(rfc3339_plus_seconds("yesterday", 600), "");
  // By time, not by text: 00:30 at +01:00 is 23:30 UTC the day before.
  EXPECT_EQ(later_rfc3339("2026-01-01T00:00:00Z", "2026-01-01T00:30:00+01:00"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(later_rfc3339("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.5Z"), "2026-01-01T00:00:00.5Z");
  EXPECT_EQ(later_rfc3339("", "2026-01-01T00:00:00Z"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(later_rfc3339("2026-01-01T00:00:00Z", "soon"), "2026-01-01T00:00:00Z");
}

TEST(KubeClock, ManualSleepEndsOnAdvanceOrStop) {
  auto clock = std::make_shared<ManualClock>();
  std::stop_source stop;
  std::atomic<int> result{-1};
  std::thread t([&] { result = clock->sleep_for(10s, stop.get_token()) ? 1 : 0; });
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(result.load(), -1);
  clock->advance(10s);
  t.join();
  EXPECT_EQ(result.load(), 1);
  std::thread t2([&] { result = clock->sleep_for(10s, stop.get_token()) ? 1 : 0; });
  stop.request_stop();
  t2.join();
  EXPECT_EQ(result.load(), 0);
}

TEST(KubeClock, RealSleepIsInterruptedByStop) {
  std::stop_source stop;
  auto start = std::chrono::steady_clock::now();
  std::thread t([&] { std::this_thread::sleep_for(20ms); stop.request_stop(); });
  EXPECT_FALSE(real_clock()->sleep_for(10s, stop.get_token()));
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(KubeBackoff, DoublesToMaxWithoutJitter) {
  Backoff b({100ms, 1000ms, 2.0, 0.0}, 1);
  std::vector<long> got;
  for (int i = 0; i < 6; ++i) got.push_back(b.next().count());
  EXPECT_EQ(got, (std::vector<long>{100, 200, 400, 800, 1000, 1000}));
  b.reset();
  EXPECT_EQ(b.next().count(), 100);
}

TEST(KubeBackoff, JitterStaysWithinItsBandAndDependsOnSeed) {
  Backoff a({100ms, 100000ms, 2.0, 1.0}, 1), c({100ms, 100000ms, 2.0, 1.0}, 2);
  bool differ = false;
  long base = 100;
  for (int i = 0; i < 8; ++i, base *= 2) {
    long x = a.next().count(), y = c.next().count();
    EXPECT_GE(x, base);
    EXPECT_LT(x, 2 * base);
    differ = differ || x != y;
  }
  EXPECT_TRUE(differ);
}

TEST(KubeRetry, RetriesConflictsOnlyAndStopsAfterSteps) {
  int calls = 0;
  auto r = retry_on_conflict([&]() -> Result<int> {
    return ++calls < 3 ? Result<int>(error_from_response(409, "")) : Result<int>(calls);
  }, {5, 1ms, 1.0, 0.0});
  EXPECT_EQ(*r, 3);
  calls = 0;
  auto nf = retry_on_conflict([&]() -> Result<void> { ++calls; return error_from_response(404, ""); });
  EXPECT_TRUE(nf.is(ErrorKind::NotFound));
  EXPECT_EQ(calls, 1);
  calls = 0;
  auto never = retry_on_conflict([&]() -> Result<void> { ++calls; return error_from_response(409, ""); },
                                 {4, 1ms, 1.0, 0.0});
  EXPECT_TRUE(never.is(ErrorKind::Conflict));
  EXPECT_EQ(calls, 4);
}

Json pod(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ns1"}, {"uid", "uid-" + name}}}};
}

TEST(KubeEventCorrelator, RepeatsBecomeCountUpdatesOfTheFirstEvent) {
  auto clock = std::make_shared<ManualClock>();
  EventCorrelator c({"flotilla-operator", "host-1"}, clock);
  auto first = c.correlate(pod("p"), "Warning", "BackOff", "restarting");
  EXPECT_FALSE(first.is_update);
  EXPECT_EQ(first.event["count"], 1);
  EXPECT_EQ(first.event["metadata"]["namespace"], "ns1");
  EXPECT_EQ(first.event["involvedObject"]["uid"], "uid-p");
  EXPECT_EQ(first.event["firstTimestamp"], "2026-01-01T00:00:00Z");
  clock->advance(5s);
  c.correlate(pod("p"), "Warning", "BackOff", "restarting");
  clock->advance(5s);
  auto third = c.correlate(pod("p"), "Warning", "BackOff", "restarting");
  EXPECT_TRUE(third.is_update);
  EXPECT_EQ(third.event["count"], 3);
  EXPECT_EQ(third.event["metadata"]["name"], first.event["metadata"]["name"]);
  EXPECT_EQ(third.event["firstTimestamp"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(third.event["lastTimestamp"], "2026-01-01T00:00:10Z");
  // A different object, reason or message is a different event.
  EXPECT_FALSE(c.correlate(pod("q"), "Warning", "BackOff", "restarting").is_update);
  EXPECT_FALSE(c.correlate(pod("p"), "Normal", "BackOff", "restarting").is_update);
  EXPECT_FALSE(c.correlate(pod("p"), "Warning", "BackOff", "other message").is_update);
}

TEST(KubeEventCorrelator, ManySimilarMessagesAreCombined) {
  auto clock = std::make_shared<ManualClock>();
  EventCorrelator c({"op", "h"}, clock);
  for (int i = 0; i < 10; ++i) {
    auto e = c.correlate(pod("p"), "Normal", "Scaled", "to " + std::to_string(i));
    EXPECT_FALSE(e.is_update);
    EXPECT_EQ(e.event["message"], "to " + std::to_string(i));
  }
  auto eleventh = c.correlate(pod("p"), "Normal", "Scaled", "to 10");
  EXPECT_FALSE(eleventh.is_update);
  EXPECT_EQ(eleventh.event["message"], "(combined from similar events): to 10");
  auto twelfth = c.correlate(pod("p"), "Normal", "Scaled", "to 11");
  EXPECT_TRUE(twelfth.is_update);
  EXPECT_EQ(twelfth.event["count"], 2);
  EXPECT_EQ(twelfth.event["message"], "(combined from similar events): to 11");
  // After the window without similar events, messages stand alone again.
  clock->advance(601s);
  EXPECT_EQ(c.correlate(pod("p"), "Normal", "Scaled", "to 12").event["message"], "to 12");
}

LeaderElectionConfig valid_config() {
  LeaderElectionConfig c;
  c.lease_name = "flotilla";
  c.identity = "me";
  c.on_started_leading = [](std::stop_token) {};
  c.on_stopped_leading = [] {};
  return c;
}

TEST(KubeLeaderElection, TimingRulesFollowClientGo) {
  auto c = valid_config();
  EXPECT_EQ(validate(c), "");  // 15 s > 10 s > 2 s * 1.2
  c.renew_deadline = 15s;
  EXPECT_NE(validate(c).find("lease_duration (15000 ms) must be greater than renew_deadline"),
            std::string::npos);
  c = valid_config();
  c.renew_deadline = 2400ms;  // == 2 s * 1.2: not strictly greater
  EXPECT_NE(validate(c).find("retry_period (2000 ms) * 1.2"), std::string::npos);
  c.renew_deadline = 2401ms;
  EXPECT_EQ(validate(c), "");
  c.retry_period = 0ms;
  EXPECT_NE(validate(c).find("retry_period must be positive"), std::string::npos);
  c = valid_config();
  c.identity = "";
  EXPECT_NE(validate(c).find("identity"), std::string::npos);
  c = valid_config();
  c.on_stopped_leading = nullptr;
  EXPECT_NE(validate(c), "");
  c = valid_config();
  c.lease_duration = 1s;
  EXPECT_THROW(LeaderElector(nullptr, c), std::invalid_argument);
}

TEST(KubeLeaderElection, LeaseDecisions) {
  ManualClock clock;
  const auto t0 = clock.now();
  const auto wall = clock.wall_now();
  // No lease yet: create it.
  auto d = decide_lease(std::nullopt, t0, t0, wall, "me", 15s);
  ASSERT_TRUE(d.acquire);
  EXPECT_EQ(d.record.holder_identity, "me");
  EXPECT_EQ(d.record.lease_duration_seconds, 15);
  EXPECT_EQ(d.record.lease_transitions, 0);
  EXPECT_EQ(d.record.acquire_time, "2026-01-01T00:00:00.000000Z");

  LeaseRecord other{"other", 15, "2025-12-31T23:00:00.000000Z", "2025-12-31T23:59:59.000000Z", 4};
  // Held by someone else and changed 14.999 s ago on our clock: keep waiting.
  EXPECT_FALSE(decide_lease(other, t0, t0 + 14999ms, wall, "me", 15s).acquire);
  // Unchanged for the whole lease duration: take over, one more transition.
  d = decide_lease(other, t0, t0 + 15s, wall, "me", 15s);
  ASSERT_TRUE(d.acquire);
  EXPECT_EQ(d.record.holder_identity, "me");
  EXPECT_EQ(d.record.lease_transitions, 5);
  EXPECT_EQ(d.record.acquire_time, d.record.renew_time);

  // Renewing our own lease keeps acquireTime and transitions.
  LeaseRecord mine{"me", 15, "2025-12-31T23:00:00.000000Z", "2025-12-31T23:59:59.000000Z", 4};
  d = decide_lease(mine, t0, t0 + 1s, wall, "me", 15s);
  ASSERT_TRUE(d.acquire);
  EXPECT_EQ(d.record.acquire_time, "2025-12-31T23:00:00.000000Z");
  EXPECT_EQ(d.record.lease_transitions, 4);
  EXPECT_EQ(d.record.renew_time, "2026-01-01T00:00:00.000000Z");

  // A released lease (no holder) is free at once.
  LeaseRecord released{"", 1, "", "", 4};
  EXPECT_TRUE(decide_lease(released, t0, t0, wall, "me", 15s).acquire);
}

}  // namespace
}  // namespace flotilla::kube
