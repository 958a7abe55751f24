#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

namespace flotilla::kube {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kubecfg-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
  }
};

// base64("CA-PEM") = "Q0EtUEVN", base64("CERT") = "Q0VSVA==", base64("KEY!") = "S0VZIQ==".
const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0EtUEVN
- name: file-cluster
  cluster:
    server: https://10.0.0.1:443
    certificate-authority: certs/ca.pem
- name: lax-cluster
  cluster:
    server: https://lax:443
    insecure-skip-tls-verify: true
users:
- name: token-user
  user:
    token: abc123
- name: cert-user
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZIQ==
- name: file-user
  user:
    tokenFile: token.txt
- name: half-user
  user:
    client-certificate-data: Q0VSVA==
contexts:
- name: dev
  context: {cluster: dev-cluster, user: token-user, namespace: team-a}
- name: files
  context: {cluster: file-cluster, user: file-user}
- name: certs
  context: {cluster: lax-cluster, user: cert-user}
- name: half
  context: {cluster: dev-cluster, user: half-user}
- name: dangling
  context: {cluster: nowhere, user: token-user}
)";

TEST(KubeConfigFile, CurrentContextWithInlineCaAndToken) {
  auto cfg = parse_kubeconfig(kKubeconfig, "/nonexistent");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->context, "dev");
  EXPECT_EQ(cfg->server, "https://127.0.0.1:6443");
  EXPECT_EQ(cfg->ca_pem, "CA-PEM");
  EXPECT_EQ(cfg->bearer_token, "abc123");
  EXPECT_EQ(cfg->namespace_name, "team-a");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify) << "TLS verification is on by default";
}

TEST(KubeConfigFile, FilesResolveRelativeToTheKubeconfig) {
  TempDir dir;
  fs::create_directories(dir.path / "certs");
  dir.write("certs/ca.pem", "FILE-CA");
  dir.write("token.txt", "tok-from-file\n");
  dir.write("config", kKubeconfig);
  auto cfg = load_kubeconfig((dir.path / "config").string(), "files");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->ca_pem, "FILE-CA");
  EXPECT_EQ(cfg->bearer_token, "tok-from-file");
  EXPECT_EQ(cfg->namespace_name, "default");
}

TEST(KubeConfigFile, ClientCertificatesAndInsecureFlag) {
  auto cfg = parse_kubeconfig(kKubeconfig, "", "certs");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->client_cert_pem, "CERT");
  EXPECT_EQ(cfg->client_key_pem, "KEY!");
  EXPECT_TRUE(cfg->insecure_skip_tls_verify);
  EXPECT_TRUE(cfg->ca_pem.empty());
}

TEST(KubeConfigFile, ErrorsSayWhatIsMissing) {
  auto missing = parse_kubeconfig(kKubeconfig, "", "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::Config);
  EXPECT_NE(missing.error().message.find("no context named \"nope\""), std::string::npos);

  auto dangling = parse_kubeconfig(kKubeconfig, "", "dangling");
  ASSERT_FALSE(dangling);
  EXPECT_NE(dangling.error().message.find("cluster \"nowhere\""), std::string::npos);

  auto half = parse_kubeconfig(kKubeconfig, "", "half");
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().message.find("without a key"), std::string::npos);

  auto unreadable = parse_kubeconfig(kKubeconfig, "/nonexistent", "files");
  ASSERT_FALSE(unreadable);
  EXPECT_NE(unreadable.error().message.find("/nonexistent/certs/ca.pem"), std::string::npos);

  EXPECT_FALSE(parse_kubeconfig("{{{ not yaml", ""));
  EXPECT_FALSE(parse_kubeconfig("- a\n- b\n", ""));
  EXPECT_FALSE(load_kubeconfig("/nonexistent/config"));
}

TEST(KubeInCluster, ReadsServiceAccountFiles) {
  TempDir dir;
  dir.write("token", "sa-token\n");
  dir.write("ca.crt", "SA-CA");
  dir.write("namespace", "flotilla-system");
  InClusterEnv env{"10.96.0.1", "443", dir.path.string()};
  auto cfg = in_cluster_config(env);
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->bearer_token, "sa-token");
  EXPECT_EQ(cfg->ca_pem, "SA-CA");
  EXPECT_EQ(cfg->namespace_name, "flotilla-system");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);

  env.service_host = "fd00::1";
  EXPECT_EQ(in_cluster_config(env)->server, "https://[fd00::1]:443");
}

TEST(KubeInCluster, MissingEnvironmentOrFilesIsAConfigError) {
  TempDir dir;
  auto no_env = in_cluster_config(InClusterEnv{"", "", dir.path.string()});
  ASSERT_FALSE(no_env);
  EXPECT_NE(no_env.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  auto no_token = in_cluster_config(InClusterEnv{"10.0.0.1", "443", dir.path.string()});
  ASSERT_FALSE(no_token);
  EXPECT_NE(no_token.error().message.find("token"), std::string::npos);
}

// devcluster's pods are local processes: they find their ServiceAccount files through
// FLOTILLA_SERVICEACCOUNT_DIR, and default_config() prefers in-cluster over ~/.kube/config
// inside a pod (controller-runtime's order), so a pod never acts as the developer.
TEST(KubeInCluster, ServiceAccountDirFromEnvironmentAndPreferredInsideAPod) {
  TempDir dir, home;
  dir.write("token", "pod-token");
  dir.write("ca.crt", "CA");
  dir.write("namespace", "team");
  fs::create_directories(home.path / ".kube");
  std::ofstream(home.path / ".kube" / "config") << "apiVersion: v1\nkind: Config\n";
  ::setenv("FLOTILLA_SERVICEACCOUNT_DIR", dir.path.c_str(), 1);
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  ::setenv("HOME", home.path.c_str(), 1);
  ::setenv("KUBECONFIG", "", 1);
  auto cfg = default_config();
  if (old_home) ::setenv("HOME", saved_home.c_str(), 1);
  ::unsetenv("FLOTILLA_SERVICEACCOUNT_DIR");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->server, "https://127.0.0.1:6443");
  EXPECT_EQ(cfg->bearer_token, "pod-token");
  EXPECT_EQ(cfg->namespace_name, "team");
  // Without the variable the standard path is read (absent here: a clear error naming it).
  auto standard = in_cluster_config(InClusterEnv{"10.0.0.1", "443", std::nullopt});
  ASSERT_FALSE(standard);
  EXPECT_NE(standard.error().message.find("/var/run/secrets/kubernetes.io/serviceaccount/token"), std::string::npos);
}

TEST(KubeBase64, DecodesStandardAndUrlAlphabets) {
  EXPECT_EQ(base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(base64_decode("aGVs\nbG8"), "hello");
  EXPECT_EQ(base64_decode("-_8="), std::string("\xfb\xff", 2));
  EXPECT_FALSE(base64_decode("a*b"));
}

}  // namespace
}  // namespace flotilla::kube
