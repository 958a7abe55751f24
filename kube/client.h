#pragma once
// kube::Client — typed REST calls on JSON objects against one API server.
//
// Contract:
// - Every call returns Result<...>: the object (or List) the server answered, or an Error whose
//   kind comes from the Status body (NotFound, Conflict, Gone, Invalid with causes, ...) or from
//   the transport (Transient: connection refused/reset, timeouts; also 5xx and 429).
// - create/update fill in apiVersion and kind from the Resource when the object lacks them;
//   update and update_status send the object's metadata.resourceVersion, so a stale one is a
//   Conflict (optimistic concurrency; see retry.h).
// - patch sends application/merge-patch+json, application/json-patch+json or
//   application/strategic-merge-patch+json.
// - watch streams events to on_event until the server ends the stream (Result ok), on_event
//   returns false, `stop` is requested, or the connection fails (Transient). An HTTP error on
//   the watch request itself (e.g. 410 Gone) is returned as that Error.
// - Thread-safe: concurrent calls use separate connections (kube/net keeps idle ones).
// Caveats: no protobuf, no Table output, no dry-run/field managers (server-side apply).
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "kube/config.h"
#include "kube/error.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "kube/watch_event.h"

namespace flotilla::kube {

namespace net {
class HttpClient;
}

struct ListOptions {
  std::string label_selector;   // "app=x,tier!=db"
  std::string field_selector;   // "metadata.name=x", "spec.nodeName=n1"
  int limit = 0;                // 0 = no paging
  std::string continue_token;
  std::string resource_version;  // "" = most recent
};

struct WatchOptions {
  std::string resource_version;  // start after this version ("" = from now, after the list)
  std::string label_selector;
  std::string field_selector;
  bool allow_bookmarks = true;
  int timeout_seconds = 290;  // the server ends the stream after this; the watcher resumes
};

enum class PatchType { Merge, Json, StrategicMerge };

struct DeleteOptions {
  std::optional<int> grace_period_seconds;
  std::string propagation_policy;  // "Foreground", "Background", "Orphan" or "" (server default)
  std::string precondition_resource_version;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};
};

class Client {
 public:
  static Result<std::shared_ptr<Client>> create(const Config& config, ClientOptions options = {});
  ~Client();

  Result<Json> get(const Resource& res, const std::string& ns, const std::string& name);
  // Returns the List object (items, metadata.resourceVersion, metadata.continue).
  Result<Json> list(const Resource& res, const std::string& ns, const ListOptions& options = {});
  Result<Json> create(const Resource& res, const std::string& ns, const Json& object);
  Result<Json> update(const Resource& res, const std::string& ns, const Json& object);
  Result<Json> update_status(const Resource& res, const std::string& ns, const Json& object);
  Result<Json> patch(const Resource& res, const std::string& ns, const std::string& name,
                     PatchType type, const Json& patch, const std::string& subresource = "");
  // Returns what the server answered: the deleted object (or a Status when it was already gone
  // by the time the server answered, or the object with deletionTimestamp while finalizers hold).
  Result<Json> remove(const Resource& res, const std::string& ns, const std::string& name,
                      const DeleteOptions& options = {});
  Result<void> watch(const Resource& res, const std::string& ns, const WatchOptions& options,
                     const std::function<bool(WatchEvent)>& on_event, std::stop_token stop = {});

  // Raw call for paths not covered above (discovery, admin endpoints). Body "" → none.
  Result<Json> request(const std::string& method, const std::string& path_and_query,
                       const std::string& body = "",
                       const std::string& content_type = "application/json");

  const Config& config() const { return config_; }
  // The namespace of the kubeconfig context / service account.
  const std::string& default_namespace() const { return config_.namespace_name; }

 private:
  Client(Config config, std::unique_ptr<net::HttpClient> http);
  Config config_;
  std::unique_ptr<net::HttpClient> http_;
};

std::string_view content_type(PatchType type);

}  // namespace flotilla::kube
