#include "devcluster/devcluster.h"

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "devcluster/api.h"
#include "devcluster/deployment_controller.h"
#include "devcluster/http_api.h"
#include "devcluster/rbac.h"
#include "devcluster/service_accounts.h"
#include "devcluster/kubelet.h"
#include "devcluster/nodes_file.h"
#include "kube/net/http_server.h"
#include "kube/net/x509.h"

namespace flotilla::devcluster {

namespace fs = std::filesystem;

struct Devcluster::Impl {
  DevclusterOptions options;
  std::string host;
  std::string token;
  kube::net::PemPair ca, server_cert;
  Store store;
  std::unique_ptr<Api> api;
  std::unique_ptr<ServiceAccountTokens> sa_tokens;
  std::unique_ptr<Kubelet> kubelet;
  std::unique_ptr<DeploymentController> deployments;
  std::unique_ptr<HttpApi> http_api;
  std::unique_ptr<kube::net::HttpServer> server;
};

namespace {

bool read_file(const fs::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool write_private(const fs::path& p, const std::string& text, std::string* error) {
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !(out << text) || !out.flush()) {
      *error = "cannot write " + tmp.string();
      return false;
    }
  }
  ::chmod(tmp.c_str(), 0600);
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    *error = "cannot write " + p.string() + ": " + ec.message();
    return false;
  }
  return true;
}

bool is_ip(const std::string& host) { return host.find_first_not_of("0123456789.:") == std::string::npos; }

}  // namespace

Devcluster::Devcluster() : impl_(std::make_unique<Impl>()) {}
Devcluster::~Devcluster() { stop(); }

bool Devcluster::start(const DevclusterOptions& options, std::string* error) {
  Impl& d = *impl_;
  d.options = options;
  auto colon = options.listen.rfind(':');
  if (colon == std::string::npos) {
    *error = "--listen must be HOST:PORT, got '" + options.listen + "'";
    return false;
  }
  d.host = options.listen.substr(0, colon);
  if (d.host.size() > 2 && d.host.front() == '[') d.host = d.host.substr(1, d.host.size() - 2);
  int port = -1;
  const std::string port_text = options.listen.substr(colon + 1);
  try {
    size_t used = 0;
    port = std::stoi(port_text, &used);
    if (used != port_text.size()) port = -1;
  } catch (...) {
  }
  if (port < 0 || port > 65535) {  // the socket layer would silently wrap 99999 to 34463
    *error = "--listen port must be a number from 0 to 65535 (0 picks a free one), got '" + port_text + "'";
    return false;
  }
  if (options.data_dir.empty()) {
    *error = "--data-dir is required";
    return false;
  }
  std::error_code ec;
  fs::create_directories(options.data_dir / "pki", ec);
  if (ec) {
    *error = "cannot create data dir " + options.data_dir.string() + ": " + ec.message();
    return false;
  }
  ::chmod(options.data_dir.c_str(), 0700);

  // Nodes file first: a typo there should fail before anything else happens.
  std::vector<NodeSpec> nodes;
  if (!options.nodes_file.empty()) {
    std::string text;
    if (!read_file(options.nodes_file, &text)) {
      *error = "cannot read nodes file " + options.nodes_file.string();
      return false;
    }
    if (!parse_nodes_yaml(text, &nodes, error)) {
      *error = options.nodes_file.string() + ": " + *error;
      return false;
    }
  }

  // PKI and token, generated once and kept.
  fs::path pki = options.data_dir / "pki";
  if (!read_file(pki / "ca.crt", &d.ca.cert_pem) || !read_file(pki / "ca.key", &d.ca.key_pem)) {
    d.ca = kube::net::issue_self_signed_ca("flotilla-devcluster-ca", 3650, error);
    if (d.ca.cert_pem.empty() || !write_private(pki / "ca.key", d.ca.key_pem, error) ||
        !write_private(pki / "ca.crt", d.ca.cert_pem, error))
      return false;
    fs::remove(pki / "server.crt", ec);
  }
  std::string server_for;
  read_file(pki / "server.for", &server_for);
  if (server_for != d.host || !read_file(pki / "server.crt", &d.server_cert.cert_pem) ||
      !read_file(pki / "server.key", &d.server_cert.key_pem)) {
    kube::net::LeafSpec leaf{"flotilla-devcluster", {"localhost"}, {"127.0.0.1", "::1"}, {}, 3650};
    if (is_ip(d.host) && d.host != "127.0.0.1" && d.host != "::1" && d.host != "0.0.0.0") leaf.ip_addresses.push_back(d.host);
    if (!is_ip(d.host) && d.host != "localhost") leaf.dns_names.push_back(d.host);
    d.server_cert = kube::net::issue_leaf(d.ca, leaf, error);
    if (d.server_cert.cert_pem.empty() || !write_private(pki / "server.key", d.server_cert.key_pem, error) ||
        !write_private(pki / "server.crt", d.server_cert.cert_pem, error) ||
        !write_private(pki / "server.for", d.host, error))
      return false;
  }
  if (!fs::exists(pki / "admin.crt")) {
    auto admin = kube::net::issue_leaf(d.ca, {"devcluster-admin", {}, {}, {"system:masters"}, 3650}, error);
    if (admin.cert_pem.empty() || !write_private(pki / "admin.key", admin.key_pem, error) ||
        !write_private(pki / "admin.crt", admin.cert_pem, error))
      return false;
  }
  if (!read_file(options.data_dir / "token", &d.token) || d.token.size() < 16) {
    d.token = random_hex(24);
    if (!write_private(options.data_dir / "token", d.token, error)) return false;
  }
  while (!d.token.empty() && (d.token.back() == '\n' || d.token.back() == ' ')) d.token.pop_back();
  // The key ServiceAccount tokens are signed with: kept, so tokens stay valid across restarts.
  std::string sa_key;
  if (!read_file(pki / "sa.key", &sa_key) || sa_key.size() < 32) {
    sa_key = random_hex(32);
    if (!write_private(pki / "sa.key", sa_key, error)) return false;
  }
  d.sa_tokens = std::make_unique<ServiceAccountTokens>(sa_key);

  StoreOptions sopts;
  sopts.dir = options.data_dir / "store";
  sopts.window_events = options.watch_window_events;
  sopts.window_bytes = options.watch_window_bytes;
  if (!d.store.open(sopts, error)) return false;
  d.api = std::make_unique<Api>(d.store);
  d.api->reload_crds();
  auto reg = d.api->registry();
  const ResourceType* namespaces = reg->find("", "v1", "namespaces");
  const ResourceType* node_type = reg->find("", "v1", "nodes");
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"})
    if (!d.api->get(*namespaces, "", ns).ok()) d.api->create(*namespaces, "", {{"metadata", {{"name", ns}}}}, {});
  d.api->ensure_default_service_accounts();
  // The bootstrap ClusterRoles and bindings of every Kubernetes cluster (created when absent).
  for (const auto& [plural, objects] : {std::pair{"clusterroles", bootstrap_cluster_roles()},
                                        std::pair{"clusterrolebindings", bootstrap_cluster_role_bindings()}}) {
    const ResourceType* t = reg->find("rbac.authorization.k8s.io", "v1", plural);
    for (const auto& obj : objects)
      if (!d.api->get(*t, "", obj["metadata"].value("name", "")).ok()) d.api->create(*t, "", obj, {});
  }
  for (const auto& spec : nodes) {
    Json desired = node_object(spec);
    if (!d.api->get(*node_type, "", spec.name).ok()) {
      Outcome o = d.api->create(*node_type, "", desired, {});
      if (!o.ok()) {
        *error = "node " + spec.name + ": " + o.error->message;
        return false;
      }
    } else {
      // Keep runtime state (failed, cordoned); refresh what the file says.
      d.api->mutate(*node_type, "", spec.name, [&](Json& n) {
        for (auto& [k, v] : desired["metadata"]["labels"].items()) n["metadata"]["labels"][k] = v;
        n["status"]["capacity"] = desired["status"]["capacity"];
        n["status"]["allocatable"] = desired["status"]["allocatable"];
        return true;
      });
    }
  }

  KubeletOptions kubelet_options{options.data_dir / "pods"};
  kubelet_options.emulated_gpus = options.emulated_gpus;
  d.kubelet = std::make_unique<Kubelet>(*d.api, kubelet_options);
  std::string tls_error;
  auto tls = kube::net::TlsContext::server({d.server_cert.cert_pem, d.server_cert.key_pem, d.ca.cert_pem}, &tls_error);
  if (!tls) {
    *error = "TLS setup failed: " + tls_error + " (the certificates in " + pki.string() +
             " are damaged; remove that directory to issue new ones, then use the new kubeconfig)";
    return false;
  }
  kube::net::ServerConfig scfg;
  scfg.host = d.host;
  scfg.port = port;
  scfg.tls = tls;
  scfg.log = [](const std::string& line) { std::cerr << "flotilla-devcluster: " + line + "\n" << std::flush; };
  // kube-apiserver's default --max-request-body-bytes, and its Status for refusals.
  scfg.max_body_bytes = kMaxRequestBodyBytes;
  scfg.error_body = [](int code, const std::string& message) {
    ApiError e{code, code == 413 ? "RequestEntityTooLarge" : "BadRequest", message, "", "", "", {}};
    return std::pair<std::string, std::string>("application/json", status_json(e).dump());
  };
  HttpApiOptions hopts;
  hopts.token = d.token;
  hopts.service_account_tokens = d.sa_tokens.get();
  hopts.bookmark_interval = std::chrono::milliseconds(options.bookmark_interval_ms);
  d.http_api = std::make_unique<HttpApi>(*d.api, hopts);
  Kubelet* kubelet = d.kubelet.get();
  d.http_api->admin = [kubelet](const std::string& m, const std::vector<std::string>& s, const Json& b) {
    return kubelet->admin(m, s, b);
  };
  d.http_api->pod_log_path = [kubelet](const std::string& ns, const std::string& pod, const std::string& c) {
    return kubelet->log_path(ns, pod, c);
  };
  HttpApi* http = d.http_api.get();
  d.server = kube::net::HttpServer::start(scfg, [http](const kube::net::HttpRequest& r, kube::net::ResponseWriter& w) {
    http->handle(r, w);
  }, error);
  if (!d.server) return false;
  ServiceAccountMounts mounts;
  mounts.api_host = d.host == "0.0.0.0" ? "127.0.0.1" : d.host == "::" ? "::1" : d.host;
  mounts.api_port = d.server->port();
  mounts.ca_pem = d.ca.cert_pem;
  ServiceAccountTokens* tokens = d.sa_tokens.get();
  mounts.issue_token = [tokens](const std::string& ns, const std::string& name, const std::string& uid) {
    // Mounted tokens are not rotated here, so they live as long as the pod may (one year).
    return tokens->issue(ns, name, uid, static_cast<long long>(std::time(nullptr)) + 365LL * 24 * 3600);
  };
  d.kubelet->set_service_account_mounts(std::move(mounts));
  d.kubelet->start();
  d.deployments = std::make_unique<DeploymentController>(*d.api);
  d.deployments->start();
  if (!options.kubeconfig_out.empty()) {
    fs::create_directories(options.kubeconfig_out.parent_path().empty() ? fs::path(".") : options.kubeconfig_out.parent_path(), ec);
    if (!write_private(options.kubeconfig_out, kubeconfig_yaml(), error)) return false;
  }
  return true;
}

void Devcluster::stop() {
  Impl& d = *impl_;
  if (d.server) d.server->stop();
  if (d.deployments) d.deployments->stop();
  if (d.kubelet) d.kubelet->stop();
  d.store.close();
}

int Devcluster::port() const { return impl_->server ? impl_->server->port() : 0; }

std::string Devcluster::server_url() const {
  const std::string& h = impl_->host;
  std::string host = h == "0.0.0.0" ? "127.0.0.1" : h;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "https://" + host + ":" + std::to_string(port());
}

std::string Devcluster::token() const { return impl_->token; }
std::string Devcluster::ca_pem() const { return impl_->ca.cert_pem; }

std::string Devcluster::kubeconfig_yaml() const {
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: devcluster\n"
         "  cluster:\n"
         "    server: " + server_url() + "\n"
         "    certificate-authority-data: " + base64_encode(impl_->ca.cert_pem) + "\n"
         "users:\n"
         "- name: devcluster-admin\n"
         "  user:\n"
         "    token: " + impl_->token + "\n"
         "contexts:\n"
         "- name: devcluster\n"
         "  context:\n"
         "    cluster: devcluster\n"
         "    user: devcluster-admin\n"
         "    namespace: default\n"
         "current-context: devcluster\n";
}

}  // namespace flotilla::devcluster
