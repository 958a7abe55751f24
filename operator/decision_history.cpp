#include "operator/decision_history.h"

#include <cmath>
#include <limits>

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

bool same_but_time(Json a, Json b) {
  a.erase("time");
  b.erase("time");
  return a == b;
}

}  // namespace

Json to_json(const ScalingDecision& d) {
  Json entry = {{"action", d.action}, {"reason", d.reason}, {"time", d.time}, {"epoch", d.epoch}};
  if (d.has_benefit) {
    entry["arrivalRatePerSecond"] = d.arrival_rate_per_s;
    entry["speedup"] = d.speedup;
    entry["overheadSeconds"] = d.overhead_s;
    entry["requiredIdleSeconds"] = std::isfinite(d.required_idle_s) ? d.required_idle_s : -1.0;
    entry["probability"] = d.probability;
    entry["threshold"] = d.threshold;
  }
  return entry;
}

ScalingDecision decision_from_json(const Json& entry) {
  ScalingDecision d;
  if (!entry.is_object()) return d;
  d.action = entry.value("action", "");
  d.reason = entry.value("reason", "");
  d.epoch = entry.value("epoch", std::int64_t{0});
  d.time = entry.value("time", "");
  d.has_benefit = entry.contains("probability");
  if (!d.has_benefit) return d;
  d.arrival_rate_per_s = entry.value("arrivalRatePerSecond", 0.0);
  d.speedup = entry.value("speedup", 0.0);
  d.overhead_s = entry.value("overheadSeconds", 0.0);
  d.required_idle_s = entry.value("requiredIdleSeconds", 0.0);
  if (d.required_idle_s < 0) d.required_idle_s = std::numeric_limits<double>::infinity();
  d.probability = entry.value("probability", 0.0);
  d.threshold = entry.value("threshold", 0.0);
  return d;
}

void record_decision(Json& status, const ScalingDecision& decision) {
  const Json entry = to_json(decision);
  status["lastDecision"] = entry;
  Json recent = status.value("recentDecisions", Json::array());
  if (!recent.is_array()) recent = Json::array();
  if (!recent.empty() && same_but_time(recent.back(), entry)) return;
  recent.push_back(entry);
  if (recent.size() > kRecentDecisions) recent.erase(recent.begin(), recent.end() - kRecentDecisions);
  status["recentDecisions"] = recent;
}

std::vector<ScalingDecision> recent_decisions(const Json& status) {
  std::vector<ScalingDecision> out;
  const Json recent = status.value("recentDecisions", Json());
  if (recent.is_array() && !recent.empty()) {
    for (const Json& entry : recent)
      if (entry.is_object()) out.push_back(decision_from_json(entry));
    return out;
  }
  const Json last = status.value("lastDecision", Json());
  if (last.is_object() && !last.empty()) out.push_back(decision_from_json(last));
  return out;
}

}  // namespace flotilla::op
