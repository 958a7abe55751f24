#include "devcluster/prober.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "kube/net/http_client.h"

namespace flotilla::devcluster {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

bool tcp_connects(const std::string& host, int port, int timeout_seconds) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return false;
  bool ok = false;
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    if (rc == 0) {
      ok = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, timeout_seconds * 1000) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return ok;
}

std::optional<ProbeSpec> parse_probe_or_throw(const Json& container, const std::string& field, std::string* unsupported);

}  // namespace

std::optional<ProbeSpec> parse_probe(const Json& container, const std::string& field, std::string* unsupported) {
  // Probes are stored unchecked (builtin_schema.h keeps them as `any`): a field of the wrong
  // type is reported, never thrown into the kubelet's loop.
  try {
    return parse_probe_or_throw(container, field, unsupported);
  } catch (const std::exception& e) {
    *unsupported = std::string("a malformed probe (") + e.what() + ")";
    return std::nullopt;
  }
}

namespace {
std::optional<ProbeSpec> parse_probe_or_throw(const Json& container, const std::string& field, std::string* unsupported) {
  const Json probe = container.value(field, Json());
  if (!probe.is_object()) return std::nullopt;
  ProbeSpec p;
  const Json* action = nullptr;
  if (probe.contains("httpGet") && probe["httpGet"].is_object()) {
    action = &probe["httpGet"];
    p.scheme = action->value("scheme", "HTTP");
    p.path = action->value("path", "/");
    if (p.path.empty() || p.path[0] != '/') p.path = "/" + p.path;
  } else if (probe.contains("tcpSocket") && probe["tcpSocket"].is_object()) {
    action = &probe["tcpSocket"];
    p.http = false;
  } else {
    *unsupported = probe.contains("exec") ? "exec" : probe.contains("grpc") ? "grpc" : "unknown";
    return std::nullopt;
  }
  if (std::string host = action->value("host", ""); !host.empty()) p.host = host;
  const Json port = action->value("port", Json());
  if (port.is_number_integer()) {
    p.port = port.get<int>();
  } else if (port.is_string()) {
    for (const auto& cp : container.value("ports", Json::array()))
      if (cp.value("name", "") == port.get<std::string>()) p.port = cp.value("containerPort", 0);
    if (p.port == 0) {
      try {
        p.port = std::stoi(port.get<std::string>());
      } catch (...) {
        *unsupported = "a port named \"" + port.get<std::string>() + "\" that the container does not declare";
        return std::nullopt;
      }
    }
  }
  p.initial_delay_seconds = probe.value("initialDelaySeconds", 0);
  p.period_seconds = std::max(1, probe.value("periodSeconds", 10));
  p.timeout_seconds = std::max(1, probe.value("timeoutSeconds", 1));
  p.success_threshold = std::max(1, probe.value("successThreshold", 1));
  p.failure_threshold = std::max(1, probe.value("failureThreshold", 3));
  return p;
}
}  // namespace

bool run_probe(const ProbeSpec& probe) {
  if (!probe.http) return tcp_connects(probe.host, probe.port, probe.timeout_seconds);
  kube::net::ClientConfig cfg;
  std::string host = probe.host.find(':') != std::string::npos ? "[" + probe.host + "]" : probe.host;
  cfg.server = (probe.scheme == "HTTPS" ? "https://" : "http://") + host + ":" + std::to_string(probe.port);
  cfg.tls.insecure_skip_verify = true;  // the kubelet does not verify probe certificates either
  cfg.user_agent = "kube-probe/1.32";
  cfg.connect_timeout = std::chrono::milliseconds(probe.timeout_seconds * 1000);
  cfg.read_timeout = cfg.connect_timeout;
  cfg.max_body_bytes = 1 << 20;
  cfg.max_idle_connections = 0;
  std::string error;
  auto client = kube::net::HttpClient::create(cfg, &error);
  if (!client) return false;
  kube::net::HttpResult r = client->get(probe.path);
  return r.ok() && r.response.status >= 200 && r.response.status < 400;
}

Prober::Prober() : thread_([this] { loop(); }) {}
Prober::~Prober() { stop(); }

void Prober::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void Prober::add(const std::string& key, std::optional<ProbeSpec> readiness, std::optional<ProbeSpec> liveness) {
  std::lock_guard lock(mutex_);
  if (!readiness && !liveness) {
    targets_.erase(key);
    return;
  }
  Target t;
  auto now = Clock::now();
  if (readiness) t.next_readiness = now + std::chrono::seconds(readiness->initial_delay_seconds);
  if (liveness) t.next_liveness = now + std::chrono::seconds(liveness->initial_delay_seconds);
  t.readiness = std::move(readiness);
  t.liveness = std::move(liveness);
  targets_[key] = std::move(t);
  changed_ = true;
}

void Prober::remove(const std::string& key) {
  std::lock_guard lock(mutex_);
  targets_.erase(key);
  liveness_failed_.erase(key);
}

bool Prober::ready(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = targets_.find(key);
  return it == targets_.end() || !it->second.readiness || it->second.ready;
}

bool Prober::take_changed() { return changed_.exchange(false); }

std::set<std::string> Prober::take_liveness_failures() {
  std::lock_guard lock(mutex_);
  return std::exchange(liveness_failed_, {});
}

void Prober::loop() {
  while (!stopping_.load()) {
    // Pick the due probes under the lock, run them without it.
    struct Due {
      std::string key;
      bool readiness;
      ProbeSpec spec;
    };
    std::vector<Due> due;
    auto now = Clock::now();
    {
      std::lock_guard lock(mutex_);
      for (auto& [key, t] : targets_) {
        if (t.readiness && now >= t.next_readiness) {
          due.push_back({key, true, *t.readiness});
          t.next_readiness = now + std::chrono::seconds(t.readiness->period_seconds);
        }
        if (t.liveness && now >= t.next_liveness) {
          due.push_back({key, false, *t.liveness});
          t.next_liveness = now + std::chrono::seconds(t.liveness->period_seconds);
        }
      }
    }
    for (const auto& d : due) {
      if (stopping_.load()) return;
      bool ok = run_probe(d.spec);
      std::lock_guard lock(mutex_);
      auto it = targets_.find(d.key);
      if (it == targets_.end()) continue;
      Target& t = it->second;
      if (d.readiness) {
        t.ready_successes = ok ? t.ready_successes + 1 : 0;
        t.ready_failures = ok ? 0 : t.ready_failures + 1;
        bool was = t.ready;
        if (!t.ready && t.ready_successes >= d.spec.success_threshold) t.ready = true;
        if (t.ready && t.ready_failures >= d.spec.failure_threshold) t.ready = false;
        if (t.ready != was) changed_ = true;
      } else {
        t.live_failures = ok ? 0 : t.live_failures + 1;
        if (t.live_failures >= d.spec.failure_threshold) {
          t.live_failures = 0;
          liveness_failed_.insert(d.key);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace flotilla::devcluster
