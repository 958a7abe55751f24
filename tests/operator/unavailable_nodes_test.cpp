// status.unavailableNodes: parsing what a user may have edited, the wait in force, and its
// doubling for a node left behind again (hand-computed times).
#include "operator/unavailable_nodes.h"

#include <gtest/gtest.h>

namespace fo = flotilla::op;
using Json = nlohmann::json;

TEST(UnavailableNodes, KeepsWellFormedEntriesInForceOrRememberedAndRoundTrips) {
  const Json status = {
      {"unavailableNodes", Json::array({
                               {{"node", "n1"}, {"until", "2026-11-24T00:10:00Z"}},  // in force
                               {{"node", "n2"}, {"reason", "PodStartTimeout"}, {"until", "2026-11-24T00:00:00Z"}},
                               {{"node", "n3"}, {"until", "2026-11-23T22:59:59Z"}},  // past + 1 h: forgotten
                               {{"node", ""}, {"until", "2026-11-24T00:10:00Z"}},
                               {{"node", "n4"}, {"until", "soon"}},
                               {{"node", 7}, {"until", "2026-11-24T00:10:00Z"}},
                               "n5",
                               {{"node", "n6"}, {"until", "2026-11-24T00:10:00Z"}, {"times", "two"}, {"reason", 3}},
                           })}};
  const auto nodes = fo::UnavailableNodes::from_status(status, "2026-11-24T00:00:00Z");
  ASSERT_EQ(nodes.entries().size(), 3u);
  EXPECT_EQ(nodes.names(), (std::set<std::string>{"n1", "n6"})) << "n2's wait ended at now: remembered, not in force";
  EXPECT_EQ(nodes.summary(), "n1 until 2026-11-24T00:10:00Z, n6 until 2026-11-24T00:10:00Z");
  // Absent optional fields stay absent (the CRD's reason enum refuses ""), so an entry a user
  // wrote with node and until only is not rewritten.
  EXPECT_EQ(nodes.to_status(), Json::parse(R"([{"node": "n1", "until": "2026-11-24T00:10:00Z"},
      {"node": "n2", "reason": "PodStartTimeout", "until": "2026-11-24T00:00:00Z"},
      {"node": "n6", "until": "2026-11-24T00:10:00Z"}])"));
  EXPECT_TRUE(fo::UnavailableNodes::from_status(Json::object(), "2026-11-24T00:00:00Z").empty());
  EXPECT_TRUE(fo::UnavailableNodes::from_status({{"unavailableNodes", "n1"}}, "2026-11-24T00:00:00Z").empty());
}

// 10 min the first time; a node left behind again while remembered: 20, 40, 80 min, then 80.
TEST(UnavailableNodes, ANodeLeftBehindAgainStaysOutTwiceAsLong) {
  auto nodes = fo::UnavailableNodes::from_status(Json::object(), "2026-11-24T00:00:00Z");
  EXPECT_EQ(nodes.leave_out("n1", "PodStartTimeout", "m").until, "2026-11-24T00:10:00Z");
  const char* expected[][2] = {{"2026-11-24T00:20:00Z", "2026-11-24T00:40:00Z"},
                               {"2026-11-24T00:50:00Z", "2026-11-24T01:30:00Z"},
                               {"2026-11-24T01:40:00Z", "2026-11-24T03:00:00Z"},
                               {"2026-11-24T03:10:00Z", "2026-11-24T04:30:00Z"}};
  int times = 1;
  for (const auto& [now, until] : expected) {
    Json status = {{"unavailableNodes", nodes.to_status()}};
    nodes = fo::UnavailableNodes::from_status(status, now);
    ASSERT_EQ(nodes.names().size(), 0u) << now;
    const auto& e = nodes.leave_out("n1", "PodStartTimeout", "m");
    EXPECT_EQ(e.until, until) << now;
    EXPECT_EQ(e.times, ++times);
  }
  // Forgotten an hour after its wait ended: the next time is a first time again.
  nodes = fo::UnavailableNodes::from_status({{"unavailableNodes", nodes.to_status()}}, "2026-11-24T05:30:00Z");
  EXPECT_TRUE(nodes.empty());
  EXPECT_EQ(nodes.leave_out("n1", "PodStartTimeout", "m").until, "2026-11-24T05:40:00Z");
}
