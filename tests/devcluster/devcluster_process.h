// Test helper: runs the real flotilla-devcluster binary as a child process on a free port
// (it binds port 0 and writes its kubeconfig), talks to it over HTTPS with kube/net, and runs
// real kubectl against it. Every server is stopped in the destructor (SIGTERM, then SIGKILL).
// The server is started and reaped through flotilla::process (spawn.h, child.h).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "common/text_file.h"
#include "kube/net/http_client.h"
#include "process/poll_until.h"
#include "process/spawn.h"
#include "tests/common/tools.h"

namespace devcluster_test {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

using flotilla::read_text;

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
  int status = pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Polls `pred` every 50 ms until it holds or `limit` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  return flotilla::process::poll_until(pred, limit, 50ms);
}

inline std::string binary() { return std::string(FLOTILLA_BINARY_DIR) + "/devcluster/flotilla-devcluster"; }

inline const char* kNodesYaml = R"(nodes:
  - name: a100-0
    gpuType: A100-80GB
    gpuCount: 8
    zone: zone-a
  - name: h100-0
    gpuType: H100-80GB
    gpuCount: 4
    zone: zone-b
    labels: {pool: fast}
)";

class DevclusterProcess {
 public:
  explicit DevclusterProcess(const std::string& test_name, std::vector<std::string> extra_args = {})
      : extra_args_(std::move(extra_args)) {
    dir_ = fs::temp_directory_path() / ("flotilla-devcluster-test-" + test_name + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_text(dir_ / "nodes.yaml", kNodesYaml);
  }
  ~DevclusterProcess() {
    stop();
    fs::remove_all(dir_);
  }

  fs::path dir() const { return dir_; }
  fs::path data_dir() const { return dir_ / "data"; }
  fs::path kubeconfig() const { return dir_ / "kubeconfig"; }

  bool start() {
    fs::remove(kubeconfig());
    std::vector<std::string> args = {binary(), "--listen", "127.0.0.1:0", "--nodes", (dir_ / "nodes.yaml").string(),
                                     "--data-dir", data_dir().string(), "--kubeconfig-out", kubeconfig().string()};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    flotilla::process::SpawnOptions options;
    options.argv = args;
    options.stdout_path = dir_ / "devcluster.log";
    options.stderr_path = dir_ / "devcluster.log";
    options.isolation = flotilla::process::Isolation::kNone;
    options.exec_failure = flotilla::process::ExecFailure::kExit;
    if (nofile_limit_ > 0) options.rlimits.emplace_back(RLIMIT_NOFILE, nofile_limit_);
    child_ = flotilla::process::spawn(options);
    bool up = eventually([&] { return fs::exists(kubeconfig()) && read_text(kubeconfig()).find("current-context") != std::string::npos; },
                         20s);
    if (!up) return false;
    std::string kc = read_text(kubeconfig());
    auto s = kc.find("server: ") + 8;
    server_ = kc.substr(s, kc.find('\n', s) - s);
    token_ = read_text(data_dir() / "token");
    while (!token_.empty() && token_.back() == '\n') token_.pop_back();
    ca_ = read_text(data_dir() / "pki" / "ca.crt");
    client_ = make_client(token_);
    return client_ != nullptr;
  }

  // SIGTERM and wait (bounded), then SIGKILL.
  void stop() {
    if (!child_.valid()) return;
    child_.signal(SIGTERM);
    if (!child_.wait_for(10s)) {
      child_.signal(SIGKILL);
      child_.wait();
    }
    child_ = flotilla::process::Child();
  }

  std::unique_ptr<flotilla::kube::net::HttpClient> make_client(const std::string& token) const {
    flotilla::kube::net::ClientConfig cfg;
    cfg.server = server_;
    cfg.tls.ca_pem = ca_;
    cfg.bearer_token = token;
    std::string error;
    return flotilla::kube::net::HttpClient::create(cfg, &error);
  }
  flotilla::kube::net::HttpClient& http() { return *client_; }

  // JSON request; returns {status, body as JSON (or the raw text under "raw")}.
  std::pair<int, Json> call(const std::string& method, const std::string& path, const Json& body = nullptr,
                            const std::string& content_type = "application/json") {
    auto r = client_->send(method, path, body.is_null() ? "" : body.dump(), content_type);
    if (!r.ok()) return {0, Json{{"transport_error", r.error}}};
    Json j;
    try {
      j = Json::parse(r.response.body);
    } catch (...) {
      j = Json{{"raw", r.response.body}};
    }
    return {r.response.status, std::move(j)};  // a copy would recurse as deep as the body
  }

  // kubectl is preinstalled where Flotilla builds; elsewhere the kubectl checks are skipped.
  // True when kubectl runs, or when make test installed it (then a broken kubectl fails the
  // test instead of skipping it: tests/common/tools.h).
  static bool have_kubectl() {
    return flotilla::testing::tools_installed() ||
           run_command(flotilla::testing::tool_path("kubectl") + " version --client").exit_code == 0;
  }

  CommandResult kubectl(const std::string& args) const {
    return run_command(flotilla::testing::tool_path("kubectl") + " --kubeconfig " + kubeconfig().string() + " --cache-dir " + (dir_ / "kcache").string() +
                       " " + args);
  }
  CommandResult admin(const std::string& args) const {
    return run_command(binary() + " admin " + args + " --kubeconfig " + kubeconfig().string());
  }

  pid_t pid() const { return child_.valid() ? child_.pid() : -1; }
  // RLIMIT_NOFILE (soft and hard) for the server started next; 0 = inherit.
  void set_nofile_limit(rlim_t n) { nofile_limit_ = n; }
  std::string log() const { return read_text(dir_ / "devcluster.log"); }

 private:
  fs::path dir_;
  std::vector<std::string> extra_args_;
  flotilla::process::Child child_;
  rlim_t nofile_limit_ = 0;
  std::string server_, token_, ca_;
  std::unique_ptr<flotilla::kube::net::HttpClient> client_;
};

}  // namespace devcluster_test
