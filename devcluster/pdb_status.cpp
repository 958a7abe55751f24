#include "devcluster/pdb_status.h"

#include <algorithm>
#include <cmath>

#include "devcluster/selectors.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

// An int, or "N%" of `total` rounded up (intstr.GetScaledValueFromIntOrPercent with roundUp).
int scaled(const Json& value, int total) {
  if (value.is_number_integer()) return value.get<int>();
  if (!value.is_string()) return 0;
  std::string text = value.get<std::string>();
  try {
    if (!text.empty() && text.back() == '%')
      return static_cast<int>(std::ceil(std::stod(text.substr(0, text.size() - 1)) * total / 100.0));
    return std::stoi(text);
  } catch (...) {
    return 0;
  }
}

bool ready(const Json& pod) {
  for (const auto& c : pod.value("/status/conditions"_json_pointer, Json::array()))
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  return false;
}

}  // namespace

Json pdb_status(const Json& pdb, const std::vector<Json>& pods, const std::string& now) {
  const Json spec = pdb.value("spec", Json::object());
  LabelSelector selector;
  std::string error;
  const bool selects = spec.contains("selector") && label_selector_from_json(spec["selector"], &selector, &error);
  int expected = 0, healthy = 0;
  for (const auto& pod : pods) {
    if (!selects || !selector.matches(pod["metadata"].value("labels", Json::object()))) continue;
    const std::string phase = pod.value("/status/phase"_json_pointer, std::string());
    if (pod["metadata"].contains("deletionTimestamp") || phase == "Succeeded" || phase == "Failed") continue;
    ++expected;
    healthy += ready(pod) ? 1 : 0;
  }
  int desired = spec.contains("minAvailable") ? scaled(spec["minAvailable"], expected)
                : spec.contains("maxUnavailable") ? expected - scaled(spec["maxUnavailable"], expected)
                                                  : expected;
  desired = std::max(0, desired);
  const int allowed = std::max(0, healthy - desired);
  Json previous = Json::object();
  for (const auto& c : pdb.value("/status/conditions"_json_pointer, Json::array()))
    if (c.value("type", "") == "DisruptionAllowed") previous = c;
  const std::string status = allowed > 0 ? "True" : "False";
  Json condition = {{"type", "DisruptionAllowed"}, {"status", status},
                    {"reason", allowed > 0 ? "SufficientPods" : "InsufficientPods"}, {"message", ""},
                    {"observedGeneration", pdb["metadata"].value("generation", 0LL)},
                    {"lastTransitionTime", previous.value("status", "") == status ? previous.value("lastTransitionTime", now) : now}};
  return {{"observedGeneration", pdb["metadata"].value("generation", 0LL)},
          {"expectedPods", expected},
          {"currentHealthy", healthy},
          {"desiredHealthy", desired},
          {"disruptionsAllowed", allowed},
          {"conditions", Json::array({condition})}};
}

}  // namespace flotilla::devcluster
