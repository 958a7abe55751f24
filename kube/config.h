#pragma once
// kube::Config — where the API server is and how to authenticate to it, from a kubeconfig file
// or from inside a pod (the service account), as client-go's clientcmd / rest.InClusterConfig.
//
// Contract:
// - parse_kubeconfig picks the named context (or current-context), then its cluster and user.
//   Cluster: server, certificate-authority-data (base64 PEM) or certificate-authority (a file,
//   relative to the kubeconfig's directory), insecure-skip-tls-verify. User: client-certificate
//   (-data) + client-key(-data), token or tokenFile. Context: namespace (default "default").
// - TLS verification is on unless the kubeconfig says insecure-skip-tls-verify: true. With no
//   CA given, the system trust store is used.
// - in_cluster_config reads KUBERNETES_SERVICE_HOST/PORT and <sa_dir>/{token,ca.crt,namespace}
//   (sa_dir: as given, else $FLOTILLA_SERVICEACCOUNT_DIR, which devcluster sets for its pod
//   processes since they cannot share one fixed path, else the standard
//   /var/run/secrets/kubernetes.io/serviceaccount).
// - Every failure is a Config error with one line saying what is missing and where.
// Caveats: no exec/auth-provider plugins, no proxy-url, no merging of several kubeconfig files
// (the first file in $KUBECONFIG is used); tokenFile is read once, at load.
#include <map>
#include <optional>
#include <string>

#include "kube/error.h"

namespace flotilla::kube {

struct Config {
  std::string server;           // https://host:port[/prefix]
  std::string ca_pem;           // "" → system trust store
  std::string client_cert_pem;  // mutual TLS, optional
  std::string client_key_pem;
  std::string bearer_token;
  bool insecure_skip_tls_verify = false;
  std::string namespace_name = "default";  // the context's (or service account's) namespace
  std::string context;                      // which kubeconfig context was used ("" in-cluster)
};

// `base_dir` resolves relative file paths; `context` "" means current-context.
Result<Config> parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir,
                                const std::string& context = "");
Result<Config> load_kubeconfig(const std::string& path, const std::string& context = "");

struct InClusterEnv {
  std::optional<std::string> service_host;  // unset: read KUBERNETES_SERVICE_HOST
  std::optional<std::string> service_port;  // unset: read KUBERNETES_SERVICE_PORT
  std::optional<std::string> sa_dir;  // unset: $FLOTILLA_SERVICEACCOUNT_DIR, else the standard path
};
inline constexpr char kDefaultServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
Result<Config> in_cluster_config(const InClusterEnv& env = {});

// $KUBECONFIG (first path), else in-cluster when KUBERNETES_SERVICE_HOST is set, else
// ~/.kube/config when it exists, else in-cluster (controller-runtime's order).
Result<Config> default_config();

std::optional<std::string> base64_decode(const std::string& text);

}  // namespace flotilla::kube
