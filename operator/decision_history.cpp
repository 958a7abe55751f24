#include "operator/decision_history.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

bool same_but_time(Json a, Json b) {
  a.erase("time");
  b.erase("time");
  return a == b;
}

}  // namespace

void record_decision(Json& status, const Json& decision) {
  status["lastDecision"] = decision;
  Json recent = status.value("recentDecisions", Json::array());
  if (!recent.is_array()) recent = Json::array();
  if (!recent.empty() && same_but_time(recent.back(), decision)) return;
  recent.push_back(decision);
  if (recent.size() > kRecentDecisions) recent.erase(recent.begin(), recent.end() - kRecentDecisions);
  status["recentDecisions"] = recent;
}

std::vector<Json> recent_decisions(const Json& status) {
  const Json recent = status.value("recentDecisions", Json());
  if (recent.is_array() && !recent.empty()) return {recent.begin(), recent.end()};
  const Json last = status.value("lastDecision", Json());
  if (last.is_object() && !last.empty()) return {last};
  return {};
}

}  // namespace flotilla::op
