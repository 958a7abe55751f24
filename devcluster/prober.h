// Readiness and liveness probes of pod containers, run by devcluster's kubelet: httpGet (http
// or https, certificates not verified, as the kubelet does) and tcpSocket against the pod's
// address (127.0.0.1 unless the probe names a host), with the probe's timing fields.
//
// Guarantees: a container with a readiness probe is not ready until the probe has succeeded
//   successThreshold times in a row (after initialDelaySeconds), and turns not ready after
//   failureThreshold failures; a container without one is ready while running. A liveness
//   probe that fails failureThreshold times in a row is reported once by take_liveness_failures()
//   (the kubelet then kills the container, which restarts it per restartPolicy). Probes run on
//   the prober's own thread, never on the kubelet's; an HTTP answer 200..399 is a success,
//   anything else (or no answer within timeoutSeconds) a failure. Named ports are resolved
//   against the container's ports.
// Assumes: pods are local processes listening on 127.0.0.1.
// Caveats: exec and grpc probes are not run: a container whose readiness probe is exec or
//   grpc is treated as having none (ready while running; the kubelet logs one line), and such
//   liveness probes are ignored; startupProbe is ignored; httpGet.httpHeaders are not sent.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace flotilla::devcluster {

struct ProbeSpec {
  bool http = true;  // false: tcpSocket
  std::string scheme = "HTTP";
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path = "/";
  int initial_delay_seconds = 0;
  int period_seconds = 10;
  int timeout_seconds = 1;
  int success_threshold = 1;
  int failure_threshold = 3;
};

// The probe of `container` (a container JSON) under `field` ("readinessProbe", "livenessProbe");
// nullopt when there is none, or when it is of a kind devcluster does not run (*unsupported
// then says which) or names a port the container does not declare.
std::optional<ProbeSpec> parse_probe(const nlohmann::json& container, const std::string& field, std::string* unsupported);

// One probe attempt (blocking up to timeout_seconds).
bool run_probe(const ProbeSpec& probe);

class Prober {
 public:
  Prober();
  ~Prober();
  void stop();
  // key: "<pod uid>/<container>"; replaces what was registered under it.
  void add(const std::string& key, std::optional<ProbeSpec> readiness, std::optional<ProbeSpec> liveness);
  void remove(const std::string& key);
  bool ready(const std::string& key) const;  // true when no readiness probe is registered
  bool take_changed();                       // readiness of some container changed since the last call
  std::set<std::string> take_liveness_failures();

 private:
  struct Target {
    std::optional<ProbeSpec> readiness, liveness;
    std::chrono::steady_clock::time_point next_readiness, next_liveness;
    int ready_successes = 0, ready_failures = 0, live_failures = 0;
    bool ready = false;
  };
  void loop();

  mutable std::mutex mutex_;
  std::map<std::string, Target> targets_;
  std::set<std::string> liveness_failed_;
  std::atomic<bool> changed_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace flotilla::devcluster
