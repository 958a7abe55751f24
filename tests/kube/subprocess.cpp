#include "subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace flotilla::kube::testing {

using namespace std::chrono_literals;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return 0;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
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
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::setpgid(0, 0);
    ::execv(args[0], args.data());
    std::_Exit(127);
  }
}

Subprocess::~Subprocess() { stop(1s); }

bool Subprocess::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    pid_ = -1;
    return false;
  }
  return true;
}

int Subprocess::stop(std::chrono::milliseconds grace) {
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return status_;
    std::this_thread::sleep_for(5ms);
  }
  kill_now();
  return status_;
}

void Subprocess::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  pid_ = -1;
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
