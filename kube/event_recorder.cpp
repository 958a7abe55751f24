#include "kube/event_recorder.h"

#include <cstdio>

namespace flotilla::kube {

namespace {

Json object_reference(const Json& obj) {
  Json ref = Json::object();
  if (obj.contains("apiVersion")) ref["apiVersion"] = obj["apiVersion"];
  if (obj.contains("kind")) ref["kind"] = obj["kind"];
  ref["name"] = object_name(obj);
  if (auto ns = object_namespace(obj); !ns.empty()) ref["namespace"] = ns;
  if (auto uid = object_uid(obj); !uid.empty()) ref["uid"] = uid;
  if (auto rv = object_resource_version(obj); !rv.empty()) ref["resourceVersion"] = rv;
  return ref;
}

std::string join(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    out += p;
    out += '\x1f';
  }
  return out;
}

}  // namespace

EventCorrelator::EventCorrelator(EventSource source, std::shared_ptr<const Clock> clock)
    : EventCorrelator(std::move(source), std::move(clock), Options{}) {}

EventCorrelator::EventCorrelator(EventSource source, std::shared_ptr<const Clock> clock,
                                 Options options)
    : source_(std::move(source)), clock_(std::move(clock)), options_(options) {}

void EventCorrelator::remember(const std::string& key, Seen seen) {
  if (seen_.find(key) == seen_.end()) {
    seen_order_.push_back(key);
    while (seen_order_.size() > options_.cache_size) {
      seen_.erase(seen_order_.front());
      seen_order_.pop_front();
    }
  }
  seen_[key] = std::move(seen);
}

CorrelatedEvent EventCorrelator::correlate(const Json& involved, const std::string& type,
                                           const std::string& reason, const std::string& message) {
  std::lock_guard lock(mu_);
  const auto now = clock_->now();
  const std::string stamp = format_rfc3339(clock_->wall_now());
  const Json ref = object_reference(involved);
  const std::string ref_key =
      join({ref.value("apiVersion", ""), ref.value("kind", ""), ref.value("namespace", ""),
            ref.value("name", ""), ref.value("uid", "")});
  const std::string source_key = join({source_.component, source_.host});

  // Aggregation: many distinct messages for one object/type/reason → one combined event.
  std::string effective_message = message;
  const std::string similar_key = source_key + ref_key + join({type, reason});
  auto& similar = similar_[similar_key];
  if (now - similar.last > options_.similar_window) similar.messages.clear();
  similar.last = now;
  similar.messages[message] = true;
  if (similar.messages.size() > options_.max_similar)
    effective_message = "(combined from similar events): " + message;
  const bool combined = effective_message != message;

  // Dedup: the same event again updates the first one.
  const std::string key =
      source_key + ref_key + join({type, reason, combined ? std::string("(combined)") : message});
  CorrelatedEvent out;
  auto it = seen_.find(key);
  Seen seen;
  if (it != seen_.end()) {
    seen = it->second;
    seen.count += 1;
    out.is_update = true;
  } else {
    char suffix[32];
    auto wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       clock_->wall_now().time_since_epoch()).count();
    std::snprintf(suffix, sizeof suffix, "%llx",
                  static_cast<unsigned long long>(wall_ns) + sequence_++);
    seen.name = ref.value("name", "object") + "." + suffix;
    seen.first_timestamp = stamp;
    seen.count = 1;
  }
  std::string ns = ref.value("namespace", "");
  if (ns.empty()) ns = "default";
  out.event = {{"apiVersion", "v1"},
               {"kind", "Event"},
               {"metadata", {{"name", seen.name}, {"namespace", ns}}},
               {"involvedObject", ref},
               {"type", type},
               {"reason", reason},
               {"message", effective_message},
               {"source", {{"component", source_.component}, {"host", source_.host}}},
               {"reportingComponent", source_.component},
               {"reportingInstance", source_.host},
               {"firstTimestamp", seen.first_timestamp},
               {"lastTimestamp", stamp},
               {"count", seen.count}};
  remember(key, seen);
  return out;
}

EventRecorder::EventRecorder(std::shared_ptr<Client> client, EventSource source,
                             std::shared_ptr<const Clock> clock)
    : client_(std::move(client)), correlator_(std::move(source), std::move(clock)) {}

Result<Json> EventRecorder::record(const Json& involved, const std::string& type,
                                   const std::string& reason, const std::string& message) {
  auto c = correlator_.correlate(involved, type, reason, message);
  const std::string ns = c.event["metadata"]["namespace"].get<std::string>();
  if (c.is_update) {
    Json patch = {{"count", c.event["count"]},
                  {"lastTimestamp", c.event["lastTimestamp"]},
                  {"message", c.event["message"]}};
    auto patched = client_->patch(resources::events, ns, object_name(c.event), PatchType::Merge, patch);
    if (!patched.is(ErrorKind::NotFound)) return patched;
  }
  return client_->create(resources::events, ns, c.event);
}

}  // namespace flotilla::kube
