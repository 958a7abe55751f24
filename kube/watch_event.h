#pragma once
// One event of a Kubernetes watch stream (a line of JSON: {"type": ..., "object": ...}).
// Contract: parse_watch_event never throws; a line that is not a watch event is a Decode error.
// An ERROR event carries a metav1.Status as its object (e.g. code 410 when the requested
// resourceVersion fell out of the server's window); `status_error()` turns it into an Error.
#include <string_view>

#include "kube/error.h"
#include "kube/object.h"

namespace flotilla::kube {

enum class WatchEventType { Added, Modified, Deleted, Bookmark, Error };

struct WatchEvent {
  WatchEventType type = WatchEventType::Added;
  Json object;
  Error status_error() const;  // for type == Error
};

Result<WatchEvent> parse_watch_event(std::string_view line);

}  // namespace flotilla::kube
