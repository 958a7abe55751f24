#include "kube/watch_event.h"

namespace flotilla::kube {

Error WatchEvent::status_error() const {
  int code = object.is_object() ? object.value("code", 500) : 500;
  return error_from_response(code, object.dump());
}

Result<WatchEvent> parse_watch_event(std::string_view line) {
  auto j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return decode_error("watch stream line is not a watch event: " +
                        std::string(line.substr(0, 200)));
  WatchEvent e;
  const auto type = j["type"].get<std::string>();
  if (type == "ADDED") e.type = WatchEventType::Added;
  else if (type == "MODIFIED") e.type = WatchEventType::Modified;
  else if (type == "DELETED") e.type = WatchEventType::Deleted;
  else if (type == "BOOKMARK") e.type = WatchEventType::Bookmark;
  else if (type == "ERROR") e.type = WatchEventType::Error;
  else return decode_error("unknown watch event type " + type);
  if (auto o = j.find("object"); o != j.end()) e.object = std::move(*o);
  return e;
}

}  // namespace flotilla::kube
