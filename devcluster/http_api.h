// The Kubernetes REST surface of devcluster over kube/net's HTTP server: authentication,
// routing, discovery, OpenAPI v2/v3, list/watch with selectors and paging, Table output, and
// the admin endpoints scenario scripts use.
//
// Guarantees: every error is a metav1.Status with the right HTTP code; requests need
//   `Authorization: Bearer <token>` (the admin token or a ServiceAccount's) or a client
//   certificate signed by the cluster CA, except /version, /healthz, /livez and /readyz; the
//   admin (token or certificate, group system:masters) may do everything and impersonate
//   (Impersonate-User / Impersonate-Group); everyone else is authorized by RBAC (rbac.h) and
//   refused with kube-apiserver's 403; a watch from a resourceVersion older than the
//   retained window gets an ERROR event carrying a 410 Expired Status (as kube-apiserver does);
//   bookmarks are sent every bookmark_interval when asked for.
// Assumes: Api is thread-safe (it locks the store); one thread per HTTP connection.
// Caveats: JSON only (no YAML bodies; protobuf only for the four kinds protobuf_decode.h
//   names); a selector watch turns an object entering or leaving the selection into ADDED or
//   DELETED, except for events replayed from before a restart (filtered on the new object);
//   continue tokens are keys, not snapshots (later pages see later writes).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "devcluster/api.h"
#include "devcluster/rbac.h"
#include "devcluster/service_accounts.h"
#include "kube/net/http_server.h"

namespace flotilla::devcluster {

struct HttpApiOptions {
  std::string token;  // the admin's bearer token (system:masters)
  const ServiceAccountTokens* service_account_tokens = nullptr;  // tokens of ServiceAccounts, checked by RBAC
  std::string server_address;  // for /api's serverAddressByClientCIDRs; "" = the request's Host
  std::chrono::milliseconds bookmark_interval{1000};
};

class HttpApi {
 public:
  HttpApi(Api& api, HttpApiOptions options) : api_(api), options_(std::move(options)) {}
  void handle(const kube::net::HttpRequest& req, kube::net::ResponseWriter& w);

  // POST/DELETE /admin/<segments...>: returns an Outcome (object or error).
  std::function<Outcome(const std::string& method, const std::vector<std::string>& segments, const Json& body)> admin;
  // Path of a container's log file for pods/<name>/log ("" when unknown).
  std::function<std::string(const std::string& ns, const std::string& pod, const std::string& container)> pod_log_path;

 private:
  void handle_inner(const kube::net::HttpRequest& req, kube::net::ResponseWriter& w);
  void respond_outcome(kube::net::ResponseWriter& w, const Outcome& o, const std::string& api_version);
  void discovery(const kube::net::HttpRequest& req, const std::vector<std::string>& seg, kube::net::ResponseWriter& w,
                 bool* handled);
  void openapi(const kube::net::HttpRequest& req, const std::vector<std::string>& seg, kube::net::ResponseWriter& w);
  void list(const ResourceType& type, const std::string& ns, const kube::net::HttpRequest& req, kube::net::ResponseWriter& w);
  // only_name: GET .../<plural>/<name>?watch=true watches that one object (kube-apiserver does).
  void watch(const ResourceType& type, const std::string& ns, const kube::net::HttpRequest& req, kube::net::ResponseWriter& w,
             const std::string& only_name = "");
  void answer_review(const ResourceType& type, const kube::net::HttpRequest& req, kube::net::ResponseWriter& w,
                     const UserInfo& user);
  // deployments/<name>/scale (autoscaling/v1 Scale): GET, PUT, PATCH of spec.replicas.
  void serve_scale(const ResourceType& type, const std::string& ns, const std::string& name,
                   const kube::net::HttpRequest& req, kube::net::ResponseWriter& w);
  void issue_token(const std::string& ns, const std::string& name, const kube::net::HttpRequest& req,
                   kube::net::ResponseWriter& w);
  // Who the request is from (admin token or certificate, or a ServiceAccount token), after
  // impersonation; nullopt with the 401/403 already sent.
  std::optional<UserInfo> authenticate(const kube::net::HttpRequest& req, kube::net::ResponseWriter& w);
  void serve_log(const std::string& ns, const std::string& name, const kube::net::HttpRequest& req,
                 kube::net::ResponseWriter& w);

  Api& api_;
  HttpApiOptions options_;
};

}  // namespace flotilla::devcluster
