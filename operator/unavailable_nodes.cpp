#include "operator/unavailable_nodes.h"

#include <algorithm>

#include "kube/clock.h"

namespace flotilla::op {

using Json = nlohmann::json;

UnavailableNodes UnavailableNodes::from_status(const Json& status, const std::string& now) {
  UnavailableNodes out;
  if (!status.is_object()) return out;
  const auto list = status.find("unavailableNodes");
  if (list == status.end() || !list->is_array()) return out;
  const std::optional<double> now_s = kube::rfc3339_seconds(now);
  for (const Json& e : *list) {
    if (!e.is_object() || !e.contains("node") || !e["node"].is_string() || !e.contains("until") ||
        !e["until"].is_string())
      continue;
    const std::optional<double> until_s = kube::rfc3339_seconds(e["until"].get<std::string>());
    if (!until_s || e["node"].get<std::string>().empty()) continue;
    if (now_s && *now_s >= *until_s) continue;  // expired: the node may be planned on again
    const auto text = [&](const char* field) {
      const auto it = e.find(field);
      return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    out.add({e["node"].get<std::string>(), text("reason"), text("message"), e["until"].get<std::string>()});
  }
  return out;
}

Json UnavailableNodes::to_status() const {
  Json list = Json::array();
  for (const UnavailableNode& e : entries_)
    list.push_back({{"node", e.node}, {"reason", e.reason}, {"message", e.message}, {"until", e.until}});
  return list;
}

std::set<std::string> UnavailableNodes::names() const {
  std::set<std::string> out;
  for (const UnavailableNode& e : entries_) out.insert(e.node);
  return out;
}

std::string UnavailableNodes::summary() const {
  std::string out;
  for (const UnavailableNode& e : entries_) out += (out.empty() ? "" : ", ") + e.node + " until " + e.until;
  return out;
}

void UnavailableNodes::add(UnavailableNode entry) {
  std::erase_if(entries_, [&](const UnavailableNode& e) { return e.node == entry.node; });
  entries_.push_back(std::move(entry));
}

}  // namespace flotilla::op
