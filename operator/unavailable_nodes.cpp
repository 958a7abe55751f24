#include "operator/unavailable_nodes.h"

#include <algorithm>

#include "kube/clock.h"

namespace flotilla::op {

using Json = nlohmann::json;

namespace {

std::string string_field(const Json& e, const char* field) {
  const auto it = e.find(field);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

UnavailableNodes UnavailableNodes::from_status(const Json& status, const std::string& now) {
  UnavailableNodes out;
  out.now_ = now;
  if (!status.is_object()) return out;
  const auto list = status.find("unavailableNodes");
  if (list == status.end() || !list->is_array()) return out;
  const std::optional<double> now_s = kube::rfc3339_seconds(now);
  for (const Json& e : *list) {
    if (!e.is_object()) continue;
    UnavailableNode entry{string_field(e, "node"), string_field(e, "reason"), string_field(e, "message"),
                          string_field(e, "until")};
    const std::optional<double> until_s = kube::rfc3339_seconds(entry.until);
    if (entry.node.empty() || !until_s) continue;
    if (now_s && *now_s >= *until_s + kRememberSeconds) continue;  // forgotten
    if (const auto t = e.find("times"); t != e.end() && t->is_number_integer())
      entry.times = static_cast<int>(std::clamp<std::int64_t>(t->get<std::int64_t>(), 1, 64));
    std::erase_if(out.entries_, [&](const UnavailableNode& o) { return o.node == entry.node; });
    out.entries_.push_back(std::move(entry));
  }
  return out;
}

Json UnavailableNodes::to_status() const {
  Json list = Json::array();
  for (const UnavailableNode& e : entries_) {
    Json j = {{"node", e.node}, {"until", e.until}};
    if (!e.reason.empty()) j["reason"] = e.reason;
    if (!e.message.empty()) j["message"] = e.message;
    if (e.times > 1) j["times"] = e.times;
    list.push_back(std::move(j));
  }
  return list;
}

bool UnavailableNodes::in_force(const UnavailableNode& e) const {
  const std::optional<double> now_s = kube::rfc3339_seconds(now_), until_s = kube::rfc3339_seconds(e.until);
  return !now_s || !until_s || *now_s < *until_s;
}

std::set<std::string> UnavailableNodes::names() const {
  std::set<std::string> out;
  for (const UnavailableNode& e : entries_)
    if (in_force(e)) out.insert(e.node);
  return out;
}

std::string UnavailableNodes::summary() const {
  std::string out;
  for (const UnavailableNode& e : entries_)
    if (in_force(e)) out += (out.empty() ? "" : ", ") + e.node + " until " + e.until;
  return out;
}

const UnavailableNode& UnavailableNodes::leave_out(const std::string& node, const std::string& reason,
                                                   const std::string& message) {
  int times = 1;
  const auto old =
      std::find_if(entries_.begin(), entries_.end(), [&](const UnavailableNode& e) { return e.node == node; });
  if (old != entries_.end()) {
    times = std::min(old->times + 1, 64);
    entries_.erase(old);
  }
  std::int64_t seconds = kUnavailableNodeSeconds;
  for (int i = 1; i < times && seconds < kMaxUnavailableSeconds; ++i) seconds *= 2;
  seconds = std::min<std::int64_t>(seconds, kMaxUnavailableSeconds);
  entries_.push_back({node, reason, message, kube::rfc3339_plus_seconds(now_, seconds), times});
  return entries_.back();
}

}  // namespace flotilla::op
