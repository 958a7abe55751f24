#include "kube/client.h"

#include <cctype>

#include "kube/net/http_client.h"

namespace flotilla::kube {

namespace {

void add_param(std::string& query, const char* name, const std::string& value) {
  if (value.empty()) return;
  query += query.empty() ? "?" : "&";
  query += name;
  query += "=";
  query += net::url_encode(value);
}

Result<Json> decode(const net::HttpResult& r) {
  if (!r.ok()) return transport_error(r.error);
  const auto& resp = r.response;
  if (resp.status < 200 || resp.status >= 300) {
    Error e = error_from_response(resp.status, resp.body);
    if (!e.retry_after) {
      if (auto h = resp.headers.get("Retry-After"); !h.empty() && std::isdigit(static_cast<unsigned char>(h[0])))
        e.retry_after = std::chrono::seconds(std::stol(h));
    }
    return e;
  }
  if (resp.body.empty()) return Json::object();
  auto j = Json::parse(resp.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return decode_error("response body is not JSON: " + resp.body.substr(0, 200));
  return j;
}

Json with_type(const Resource& res, const Json& object) {
  Json out = object;
  if (!out.contains("apiVersion")) out["apiVersion"] = res.api_version();
  if (!out.contains("kind") && !res.kind.empty()) out["kind"] = res.kind;
  return out;
}

}  // namespace

std::string_view content_type(PatchType type) {
  switch (type) {
    case PatchType::Merge: return "application/merge-patch+json";
    case PatchType::Json: return "application/json-patch+json";
    case PatchType::StrategicMerge: return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

Client::Client(Config config, std::unique_ptr<net::HttpClient> http)
    : config_(std::move(config)), http_(std::move(http)) {}

Client::~Client() = default;

Result<std::shared_ptr<Client>> Client::create(const Config& config, ClientOptions options) {
  net::ClientConfig nc;
  nc.server = config.server;
  nc.tls.ca_pem = config.ca_pem;
  nc.tls.client_cert_pem = config.client_cert_pem;
  nc.tls.client_key_pem = config.client_key_pem;
  nc.tls.insecure_skip_verify = config.insecure_skip_tls_verify;
  nc.bearer_token = config.bearer_token;
  nc.connect_timeout = options.connect_timeout;
  nc.read_timeout = options.request_timeout;
  std::string error;
  auto http = net::HttpClient::create(nc, &error);
  if (!http) return config_error("cannot set up a client for " + config.server + ": " + error);
  return std::shared_ptr<Client>(new Client(config, std::move(http)));
}

Result<Json> Client::request(const std::string& method, const std::string& path_and_query,
                             const std::string& body, const std::string& type) {
  net::HttpRequest req;
  req.method = method;
  req.target = path_and_query;
  req.headers.set("Accept", "application/json");
  if (!body.empty()) {
    req.body = body;
    req.headers.set("Content-Type", type);
  }
  return decode(http_->send(std::move(req)));
}

Result<Json> Client::get(const Resource& res, const std::string& ns, const std::string& name) {
  return request("GET", res.path(ns, name));
}

Result<Json> Client::list(const Resource& res, const std::string& ns, const ListOptions& o) {
  std::string query;
  add_param(query, "labelSelector", o.label_selector);
  add_param(query, "fieldSelector", o.field_selector);
  if (o.limit > 0) add_param(query, "limit", std::to_string(o.limit));
  add_param(query, "continue", o.continue_token);
  add_param(query, "resourceVersion", o.resource_version);
  return request("GET", res.path(ns) + query);
}

Result<Json> Client::create(const Resource& res, const std::string& ns, const Json& object) {
  return request("POST", res.path(ns), with_type(res, object).dump());
}

Result<Json> Client::update(const Resource& res, const std::string& ns, const Json& object) {
  return request("PUT", res.path(ns, object_name(object)), with_type(res, object).dump());
}

Result<Json> Client::update_status(const Resource& res, const std::string& ns, const Json& object) {
  return request("PUT", res.path(ns, object_name(object), "status"), with_type(res, object).dump());
}

Result<Json> Client::patch(const Resource& res, const std::string& ns, const std::string& name,
                           PatchType type, const Json& patch, const std::string& subresource) {
  return request("PATCH", res.path(ns, name, subresource), patch.dump(),
                 std::string(content_type(type)));
}

Result<Json> Client::remove(const Resource& res, const std::string& ns, const std::string& name,
                            const DeleteOptions& o) {
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (o.grace_period_seconds) body["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.propagation_policy.empty()) body["propagationPolicy"] = o.propagation_policy;
  if (!o.precondition_resource_version.empty())
    body["preconditions"] = {{"resourceVersion", o.precondition_resource_version}};
  return request("DELETE", res.path(ns, name), body.dump());
}

Result<void> Client::watch(const Resource& res, const std::string& ns, const WatchOptions& o,
                           const std::function<bool(WatchEvent)>& on_event, std::stop_token stop) {
  std::string query = "?watch=true";
  add_param(query, "resourceVersion", o.resource_version);
  add_param(query, "labelSelector", o.label_selector);
  add_param(query, "fieldSelector", o.field_selector);
  if (o.allow_bookmarks) add_param(query, "allowWatchBookmarks", "true");
  if (o.timeout_seconds > 0) add_param(query, "timeoutSeconds", std::to_string(o.timeout_seconds));
  net::HttpRequest req;
  req.method = "GET";
  req.target = res.path(ns) + query;
  req.headers.set("Accept", "application/json");
  std::string error;
  auto stream = http_->open_stream(std::move(req), &error);
  if (!stream) return transport_error("watch " + res.plural + ": " + error);
  const auto& head = stream->head();
  if (head.status < 200 || head.status >= 300) return error_from_response(head.status, head.body);
  std::stop_callback cancel_on_stop(stop, [&stream] { stream->cancel(); });
  // The server ends the stream after timeout_seconds; allow it some slack before declaring the
  // connection dead.
  const auto idle = std::chrono::seconds(o.timeout_seconds > 0 ? o.timeout_seconds + 30 : 330);
  std::string line;
  for (;;) {
    switch (stream->next_line(&line, std::chrono::duration_cast<net::Millis>(idle))) {
      case net::StreamStatus::line: {
        if (line.empty()) continue;
        auto event = parse_watch_event(line);
        if (!event) return event.error();
        if (!on_event(std::move(*event))) return {};
        continue;
      }
      case net::StreamStatus::end:
      case net::StreamStatus::cancelled:
        return {};
      case net::StreamStatus::timeout:
        return transport_error("watch " + res.plural + ": no data for " +
                               std::to_string(idle.count()) + " s");
      case net::StreamStatus::error:
        return transport_error("watch " + res.plural + ": " + stream->error());
    }
  }
}

}  // namespace flotilla::kube
