// decision_history.h: every scaling decision stays readable in status.recentDecisions after the
// next one replaces status.lastDecision (the demo observer missed a preemption that way).
#include "operator/decision_history.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace fo = flotilla::op;
using Json = nlohmann::json;

namespace {

fo::ScalingDecision decision(const std::string& action, const std::string& reason, std::int64_t epoch, int second) {
  return {.action = action,
          .reason = reason,
          .epoch = epoch,
          .time = "2026-11-24T10:00:" + std::string(second < 10 ? "0" : "") + std::to_string(second) + "Z"};
}

}  // namespace

TEST(DecisionHistory, APreemptionReplacedAtOnceByARefusedScaleUpIsStillListed) {
  Json status = Json::object();
  EXPECT_TRUE(fo::recent_decisions(status).empty());
  const fo::ScalingDecision preempt = decision("preempt", "gives 2 GPUs back for default/urgent: shrink 4 -> 2", 5, 1);
  const fo::ScalingDecision keep = decision("keep", "keep: scale-up to 4 refused", 5, 1);
  fo::record_decision(status, preempt);
  fo::record_decision(status, keep);
  EXPECT_EQ(fo::decision_from_json(status["lastDecision"]), keep);
  const std::vector<fo::ScalingDecision> recent = fo::recent_decisions(status);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0], preempt);
  EXPECT_EQ(recent[1], keep);
}

TEST(DecisionHistory, RepeatsRefreshLastDecisionOnlyAndTheHistoryKeepsTheNewestEight) {
  Json status = Json::object();
  fo::record_decision(status, decision("admit", "admitted", 1, 0));
  for (int s = 1; s < 6; ++s) fo::record_decision(status, decision("admit", "admitted", 1, s));
  EXPECT_EQ(fo::recent_decisions(status).size(), 1u) << "a reconcile repeating itself adds nothing";
  EXPECT_EQ(status["lastDecision"]["time"], "2026-11-24T10:00:05Z");
  for (int e = 2; e <= 12; ++e) fo::record_decision(status, decision("scale-up", "grow", e, 10 + e));
  const std::vector<fo::ScalingDecision> recent = fo::recent_decisions(status);
  ASSERT_EQ(recent.size(), fo::kRecentDecisions);
  EXPECT_EQ(recent.front().epoch, 5) << "epochs 5..12: the oldest dropped first";
  EXPECT_EQ(recent.back().epoch, 12);
}

// A status an older operator wrote has lastDecision only: read as a history of one.
TEST(DecisionHistory, AStatusWithoutHistoryReadsItsLastDecision) {
  const fo::ScalingDecision last = decision("admit", "admitted", 1, 0);
  const std::vector<fo::ScalingDecision> recent = fo::recent_decisions({{"lastDecision", fo::to_json(last)}});
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0], last);
}

// The schema's field names are what docs/operator.md promises a user's script (written by hand
// here, not through to_json), and a benefit check's infinite idle time survives the -1 in JSON.
TEST(DecisionHistory, TheEntrySchemaIsTheDocumentedOneAndRoundTrips) {
  const Json written = {{"action", "keep"},          {"reason", "refused"},          {"epoch", 3},
                        {"time", "2026-11-24T10:00:00Z"}, {"arrivalRatePerSecond", 0.2}, {"speedup", 0.9},
                        {"overheadSeconds", 3.0},    {"requiredIdleSeconds", -1.0},  {"probability", 0.0},
                        {"threshold", 0.6}};
  const fo::ScalingDecision d = fo::decision_from_json(written);
  EXPECT_EQ(d.action, "keep");
  EXPECT_EQ(d.epoch, 3);
  EXPECT_TRUE(d.has_benefit);
  EXPECT_DOUBLE_EQ(d.arrival_rate_per_s, 0.2);
  EXPECT_DOUBLE_EQ(d.speedup, 0.9);
  EXPECT_DOUBLE_EQ(d.overhead_s, 3.0);
  EXPECT_TRUE(std::isinf(d.required_idle_s)) << "-1 in JSON is an infinite required idle time";
  EXPECT_DOUBLE_EQ(d.threshold, 0.6);
  EXPECT_EQ(fo::to_json(d), written);
  EXPECT_EQ(fo::decision_from_json(fo::to_json(d)), d);
  const fo::ScalingDecision plain = decision("admit", "admitted", 1, 0);
  EXPECT_FALSE(fo::to_json(plain).contains("probability")) << "no benefit fields without a benefit check";
  EXPECT_EQ(fo::decision_from_json(fo::to_json(plain)), plain);
}
