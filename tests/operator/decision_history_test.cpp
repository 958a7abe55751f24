// decision_history.h: every scaling decision stays readable in status.recentDecisions after the
// next one replaces status.lastDecision (the demo observer missed a preemption that way).
#include "operator/decision_history.h"

#include <gtest/gtest.h>

#include <string>

namespace fo = flotilla::op;
using Json = nlohmann::json;

namespace {

Json decision(const std::string& action, const std::string& reason, std::int64_t epoch, int second) {
  return {{"action", action},
          {"reason", reason},
          {"epoch", epoch},
          {"time", "2026-11-24T10:00:" + std::string(second < 10 ? "0" : "") + std::to_string(second) + "Z"}};
}

}  // namespace

TEST(DecisionHistory, APreemptionReplacedAtOnceByARefusedScaleUpIsStillListed) {
  Json status = Json::object();
  EXPECT_TRUE(fo::recent_decisions(status).empty());
  const Json preempt = decision("preempt", "gives 2 GPUs back for default/urgent: shrink 4 -> 2", 5, 1);
  const Json keep = decision("keep", "keep: scale-up to 4 refused", 5, 1);
  fo::record_decision(status, preempt);
  fo::record_decision(status, keep);
  EXPECT_EQ(status["lastDecision"], keep);
  const std::vector<Json> recent = fo::recent_decisions(status);
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
  const std::vector<Json> recent = fo::recent_decisions(status);
  ASSERT_EQ(recent.size(), fo::kRecentDecisions);
  EXPECT_EQ(recent.front()["epoch"], 5) << "epochs 5..12: the oldest dropped first";
  EXPECT_EQ(recent.back()["epoch"], 12);
}

// A status an older operator wrote has lastDecision only: read as a history of one.
TEST(DecisionHistory, AStatusWithoutHistoryReadsItsLastDecision) {
  const Json last = decision("admit", "admitted", 1, 0);
  const std::vector<Json> recent = fo::recent_decisions({{"lastDecision", last}});
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0], last);
}
