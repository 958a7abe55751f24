#include "subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "process/free_port.h"
#include "process/spawn.h"

namespace flotilla::kube::testing {

using namespace std::chrono_literals;

int free_port() {
  try {
    return process::pick_free_port();
  } catch (const std::exception&) {
    return 0;
  }
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "flotilla-kube-XXXXXX").string();
  path = ::mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

Subprocess::Subprocess(std::vector<std::string> argv, fs::path log_file) : log_(std::move(log_file)) {
  process::SpawnOptions options;
  options.argv = std::move(argv);
  options.stdout_path = log_;
  options.stderr_path = log_;
  options.isolation = process::Isolation::kGroup;
  options.exec_failure = process::ExecFailure::kExit;  // exit 127, like a failed exec in a shell
  child_ = process::spawn(options);
}

Subprocess::~Subprocess() { stop(1s); }

bool Subprocess::running() {
  if (!child_.valid()) return false;
  if (auto s = child_.poll()) {
    record(*s);
    return false;
  }
  return true;
}

int Subprocess::stop(std::chrono::milliseconds grace) {
  if (!running()) return status_;
  child_.signal(SIGTERM);
  if (auto s = child_.wait_for(grace)) {
    record(*s);
    return status_;
  }
  kill_now();
  return status_;
}

void Subprocess::kill_now() {
  if (!running()) return;
  child_.signal(SIGKILL);
  record(child_.wait());
}

std::string Subprocess::output() const {
  std::ifstream in(log_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string devcluster_binary() {
  if (const char* env = std::getenv("FLOTILLA_DEVCLUSTER"); env && *env) return env;
  for (auto candidate : {fs::path(FLOTILLA_BINARY_DIR) / "devcluster" / "flotilla-devcluster",
                         fs::path(FLOTILLA_BINARY_DIR) / "flotilla-devcluster"}) {
    if (fs::exists(candidate)) return candidate.string();
  }
  return "";
}

Devcluster::Devcluster() {
  kubeconfig_ = dir_.path / "kubeconfig";
  std::ofstream(dir_.path / "nodes.yaml") << R"(nodes:
- name: node-a
  gpuType: H100
  gpuCount: 8
  zone: zone-1
)";
  port_ = free_port();
  start();
}

Devcluster::~Devcluster() { stop(); }

bool Devcluster::start() {
  ok_ = false;
  const std::string bin = devcluster_binary();
  if (bin.empty()) {
    error_ = "flotilla-devcluster is not built";
    return false;
  }
  fs::remove(kubeconfig_);
  process_ = std::make_unique<Subprocess>(
      std::vector<std::string>{bin, "--listen", "127.0.0.1:" + std::to_string(port_), "--nodes",
                               (dir_.path / "nodes.yaml").string(), "--data-dir",
                               (dir_.path / "data").string(), "--kubeconfig-out",
                               kubeconfig_.string()},
      dir_.path / "devcluster.log");
  // Bounded wait: the kubeconfig appears, then an authenticated call succeeds.
  for (int i = 0; i < 300; ++i) {
    if (!process_->running()) {
      error_ = "devcluster exited: " + process_->output();
      return false;
    }
    if (fs::exists(kubeconfig_)) {
      auto cfg = load_kubeconfig(kubeconfig_.string());
      if (cfg) {
        auto c = Client::create(*cfg);
        if (c && (*c)->list(resources::namespaces, "")) {
          ok_ = true;
          return true;
        }
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  error_ = "devcluster did not become ready in 15 s: " + process_->output();
  return false;
}

void Devcluster::stop() {
  if (process_) process_->stop(5s);
  ok_ = false;
}

bool Devcluster::restart() {
  stop();
  return start();
}

bool Devcluster::restart_with_empty_store() {
  stop();
  std::error_code ec;
  fs::remove_all(dir_.path / "data" / "store", ec);
  return start();
}

Config Devcluster::config() const { return load_kubeconfig(kubeconfig_.string()).value(); }

std::shared_ptr<Client> Devcluster::client() const { return Client::create(config()).value(); }

}  // namespace flotilla::kube::testing
