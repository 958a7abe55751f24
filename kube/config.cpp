#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace flotilla::kube {

namespace fs = std::filesystem;

std::optional<std::string> base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' ) break;
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    int v = value(c);
    if (v < 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

static std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

namespace {

// Finds the entry named `name` in a kubeconfig list such as clusters: [{name, cluster: {...}}].
std::optional<YAML::Node> find_named(const YAML::Node& list, const std::string& name,
                                     const char* inner) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
        entry["name"].as<std::string>() == name)
      return entry[inner] ? entry[inner] : YAML::Node(YAML::NodeType::Map);
  }
  return std::nullopt;
}

std::string str(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap() || !node[key] || !node[key].IsScalar()) return {};
  return node[key].as<std::string>();
}

// Inline base64 data wins over a file path, as in clientcmd.
Result<std::string> pem_from(const YAML::Node& node, const char* data_key, const char* file_key,
                             const fs::path& base_dir, const std::string& what) {
  if (auto data = str(node, data_key); !data.empty()) {
    auto decoded = base64_decode(data);
    if (!decoded) return config_error(what + ": " + data_key + " is not valid base64");
    return *decoded;
  }
  if (auto file = str(node, file_key); !file.empty()) {
    fs::path path = fs::path(file).is_absolute() ? fs::path(file) : base_dir / file;
    auto text = read_file(path);
    if (!text) return config_error(what + ": cannot read " + file_key + " " + path.string());
    return *text;
  }
  return std::string();
}

}  // namespace

Result<Config> parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir,
                                const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return config_error(std::string("kubeconfig is not valid YAML: ") + e.what());
  }
  if (!root.IsMap()) return config_error("kubeconfig is not a YAML mapping");
  try {
    Config cfg;
    cfg.context = context.empty() ? str(root, "current-context") : context;
    if (cfg.context.empty())
      return config_error("kubeconfig has no current-context; pass a context name");
    auto ctx_entry = find_named(root["contexts"], cfg.context, "context");
    if (!ctx_entry) return config_error("kubeconfig has no context named \"" + cfg.context + "\"");
    const YAML::Node ctx = *ctx_entry;
    const std::string cluster_name = str(ctx, "cluster");
    const std::string user_name = str(ctx, "user");
    if (auto ns = str(ctx, "namespace"); !ns.empty()) cfg.namespace_name = ns;

    auto cluster_entry = find_named(root["clusters"], cluster_name, "cluster");
    if (!cluster_entry)
      return config_error("kubeconfig context \"" + cfg.context + "\" names cluster \"" +
                          cluster_name + "\", which is not in clusters");
    const YAML::Node cluster = *cluster_entry;
    cfg.server = str(cluster, "server");
    if (cfg.server.empty())
      return config_error("kubeconfig cluster \"" + cluster_name + "\" has no server");
    if (cluster["insecure-skip-tls-verify"])
      cfg.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    const fs::path base(base_dir.empty() ? "." : base_dir);
    auto ca = pem_from(cluster, "certificate-authority-data", "certificate-authority", base,
                       "cluster \"" + cluster_name + "\"");
    if (!ca) return ca.error();
    cfg.ca_pem = *ca;

    if (!user_name.empty()) {
      auto user_entry = find_named(root["users"], user_name, "user");
      if (!user_entry)
        return config_error("kubeconfig context \"" + cfg.context + "\" names user \"" +
                            user_name + "\", which is not in users");
      const YAML::Node user = *user_entry;
      const std::string who = "user \"" + user_name + "\"";
      auto cert = pem_from(user, "client-certificate-data", "client-certificate", base, who);
      if (!cert) return cert.error();
      auto key = pem_from(user, "client-key-data", "client-key", base, who);
      if (!key) return key.error();
      if (cert->empty() != key->empty())
        return config_error(who + " has a client certificate without a key (or a key without a "
                                  "certificate); give both");
      cfg.client_cert_pem = *cert;
      cfg.client_key_pem = *key;
      cfg.bearer_token = str(user, "token");
      if (auto token_file = str(user, "tokenFile"); cfg.bearer_token.empty() && !token_file.empty()) {
        fs::path path = fs::path(token_file).is_absolute() ? fs::path(token_file) : base / token_file;
        auto token = read_file(path);
        if (!token) return config_error(who + ": cannot read tokenFile " + path.string());
        cfg.bearer_token = trim(*token);
      }
      if (user["exec"] || user["auth-provider"])
        if (cfg.bearer_token.empty() && cfg.client_cert_pem.empty())
          return config_error(who + " uses an exec/auth-provider plugin, which flotilla does not "
                                    "support; use a token or client certificate");
    }
    return cfg;
  } catch (const YAML::Exception& e) {
    return config_error(std::string("kubeconfig has an unexpected shape: ") + e.what());
  }
}

Result<Config> load_kubeconfig(const std::string& path, const std::string& context) {
  auto text = read_file(path);
  if (!text) return config_error("cannot read kubeconfig " + path);
  return parse_kubeconfig(*text, fs::path(path).parent_path().string(), context);
}

Result<Config> in_cluster_config(const InClusterEnv& env) {
  auto from_env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  std::string host = env.service_host ? *env.service_host : from_env("KUBERNETES_SERVICE_HOST");
  std::string port = env.service_port ? *env.service_port : from_env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty())
    return config_error("not running in a cluster: KUBERNETES_SERVICE_HOST and "
                        "KUBERNETES_SERVICE_PORT must be set");
  std::string sa_dir = env.sa_dir ? *env.sa_dir : from_env("FLOTILLA_SERVICEACCOUNT_DIR");
  if (sa_dir.empty()) sa_dir = kDefaultServiceAccountDir;
  const fs::path dir(sa_dir);
  auto token = read_file(dir / "token");
  if (!token) return config_error("in-cluster: cannot read " + (dir / "token").string());
  auto ca = read_file(dir / "ca.crt");
  if (!ca) return config_error("in-cluster: cannot read " + (dir / "ca.crt").string());
  Config cfg;
  const bool ipv6 = host.find(':') != std::string::npos;
  cfg.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  cfg.bearer_token = trim(*token);
  cfg.ca_pem = *ca;
  if (auto ns = read_file(dir / "namespace"); ns && !trim(*ns).empty()) cfg.namespace_name = trim(*ns);
  return cfg;
}

Result<Config> default_config() {
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string first(env);
    if (auto colon = first.find(':'); colon != std::string::npos) first.resize(colon);
    return load_kubeconfig(first);
  }
  // Inside a pod before ~/.kube/config, as controller-runtime's GetConfig orders them: a pod
  // that inherits a developer's HOME (devcluster's pods are local processes) must act as its
  // ServiceAccount, not as whoever owns that kubeconfig.
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host && *host) return in_cluster_config();
  if (const char* home = std::getenv("HOME"); home && *home) {
    fs::path path = fs::path(home) / ".kube" / "config";
    if (fs::exists(path)) return load_kubeconfig(path.string());
  }
  return in_cluster_config();
}

}  // namespace flotilla::kube
