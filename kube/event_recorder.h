#pragma once
// Events about objects, aggregated as client-go's record.EventCorrelator does.
//
// EventCorrelator (pure but for the injected clock):
// - Dedup: an event identical to an earlier one (same source, involved object, type, reason and
//   message) becomes an update of the earlier Event object: count+1, lastTimestamp = now,
//   firstTimestamp and name kept.
// - Aggregation: more than `max_similar` (10) events that differ only in message, for the same
//   object/type/reason within `similar_window` (10 min), collapse into one Event whose message
//   is "(combined from similar events): <latest message>", itself deduplicated by count.
// - The cache keeps at most `cache_size` keys (oldest dropped), as client-go's LRU.
// EventRecorder: sends what the correlator decided: create a new Event, or merge-patch the
// existing one (count, lastTimestamp, message); when that Event has expired on the server
// (NotFound), it is created again. record() never throws; a failure is returned for logging —
// events are best-effort by design.
// Caveat: no spam filter (client-go's per-object token bucket); no events.k8s.io/v1 series.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kube/client.h"
#include "kube/clock.h"

namespace flotilla::kube {

struct EventSource {
  std::string component;  // e.g. "flotilla-operator"
  std::string host;
};

struct CorrelatedEvent {
  Json event;          // the full Event to create, or the updated one to patch
  bool is_update = false;  // true: patch the existing Event named event.metadata.name
};

class EventCorrelator {
 public:
  struct Options {
    size_t max_similar = 10;
    std::chrono::seconds similar_window{600};
    size_t cache_size = 4096;
  };
  EventCorrelator(EventSource source, std::shared_ptr<const Clock> clock);
  EventCorrelator(EventSource source, std::shared_ptr<const Clock> clock, Options options);
  // involved: the object (apiVersion, kind, metadata.{name,namespace,uid,resourceVersion}).
  CorrelatedEvent correlate(const Json& involved, const std::string& type,
                            const std::string& reason, const std::string& message);

 private:
  struct Seen {
    std::string name;
    std::string first_timestamp;
    int count = 0;
  };
  struct Similar {
    std::map<std::string, bool> messages;
    Clock::time_point last;
  };
  void remember(const std::string& key, Seen seen);

  EventSource source_;
  std::shared_ptr<const Clock> clock_;
  Options options_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;
  std::deque<std::string> seen_order_;
  std::map<std::string, Similar> similar_;
  uint64_t sequence_ = 0;
};

class EventRecorder {
 public:
  EventRecorder(std::shared_ptr<Client> client, EventSource source,
                std::shared_ptr<const Clock> clock = real_clock());
  // type: "Normal" or "Warning". Returns the Event as stored, or why it was not.
  Result<Json> record(const Json& involved, const std::string& type, const std::string& reason,
                      const std::string& message);

 private:
  std::shared_ptr<Client> client_;
  EventCorrelator correlator_;
};

}  // namespace flotilla::kube
