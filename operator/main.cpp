// flotilla-operator: reconciles TrainingJobs (crds/) on any Kubernetes API server.
//   --kubeconfig FILE        else $KUBECONFIG, ~/.kube/config, or the in-cluster service account
//   --namespace NS           watch one namespace (default: all)
//   --metrics-addr HOST:PORT Prometheus /metrics (default 127.0.0.1:8080; 0 disables)
//   --health-addr HOST:PORT  /healthz and /readyz (default 127.0.0.1:8081)
//   --leader-elect           run only while holding the Lease (--lease-name, --lease-namespace)
//   --sidecar-command "CMD"  the worker pods' container command (default: flotilla-sidecar; '': pods without a
//                            command, a pause container on devcluster, as bench/operator_scale runs them)
//   --worker-service-account NAME  the worker pods' ServiceAccount (default: the namespace's default)
//   --gpu-catalog FILE       GPU catalog override (YAML), as flotilla plan --catalog
//   --no-benefit-check       scale up greedily (the baseline)
//   --no-preemption          a waiting job never reclaims scaled-up GPUs (FlexTrain §5.2 off)
// Cluster-wide defaults of a job's unset spec.elasticity fields (the scaling policy):
//   --benefit-threshold P    P_th of the Poisson benefit check, in [0, 1] (default 0.6)
//   --arrival-window-seconds N   window λ is measured over (default 28800)
//   --min-rescale-interval-seconds N   anti-thrash interval (default 60)
//   --pod-start-timeout-seconds N      how long a gang waits for a pod that does not start (default
//                                      600; 0: as long as it takes)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/split_words.h"
#include "kube/config.h"
#include "kube/leader_election.h"
#include "kube/net/http_server.h"
#include "operator/operator.h"
#include "planner/gpu_catalog.h"

namespace {

std::stop_source g_stop;
void on_signal(int) { g_stop.request_stop(); }

struct Flags {
  std::string kubeconfig, ns, metrics_addr = "127.0.0.1:8080", health_addr = "127.0.0.1:8081";
  bool leader_elect = false;
  std::string lease_name = "flotilla-operator", lease_namespace;
  std::string sidecar_command = "flotilla-sidecar";
  std::string worker_service_account;
  std::string catalog;
  bool benefit_check = true;
  bool preemption = true;
  std::string benefit_threshold, arrival_window_seconds, min_rescale_interval_seconds, restart_overhead_seconds;
  std::string pod_start_timeout_seconds;
};

// A number flag in [min, max]; false (and a usage line) when it is not one.
bool parse_number(const std::string& text, double min, double max, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(text, &used);
    return used == text.size() && out >= min && out <= max;
  } catch (...) {
    return false;
  }
}

int usage(const std::string& why) {
  std::fprintf(stderr,
               "flotilla-operator: %s\nusage: flotilla-operator [--kubeconfig FILE] [--namespace NS] "
               "[--metrics-addr HOST:PORT] [--health-addr HOST:PORT] [--leader-elect] [--lease-name N] "
               "[--lease-namespace NS] [--sidecar-command CMD] [--worker-service-account NAME] [--gpu-catalog FILE] "
               "[--no-benefit-check] [--no-preemption] "
               "[--benefit-threshold P] [--arrival-window-seconds N] [--min-rescale-interval-seconds N]\n"
               "       [--pod-start-timeout-seconds N]\n"
               "       [--restart-overhead-seconds S (default 30: the benefit check's T_overhead)]\n",
               why.c_str());
  return 2;
}

bool split_addr(const std::string& addr, std::string& host, int& port) {
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) return false;
  host = addr.substr(0, colon);
  if (host.empty()) host = "0.0.0.0";
  try {
    port = std::stoi(addr.substr(colon + 1));
  } catch (...) {
    return false;
  }
  return port >= 0 && port <= 65535;
}

std::unique_ptr<flotilla::kube::net::HttpServer> serve(const std::string& addr, flotilla::kube::net::Handler handler,
                                                       const char* what) {
  std::string host, error;
  int port = 0;
  if (!split_addr(addr, host, port)) {
    std::fprintf(stderr, "flotilla-operator: --%s '%s' is not HOST:PORT\n", what, addr.c_str());
    std::exit(2);
  }
  flotilla::kube::net::ServerConfig config;
  config.host = host;
  config.port = port;
  auto server = flotilla::kube::net::HttpServer::start(config, std::move(handler), &error);
  if (!server) {
    std::fprintf(stderr, "flotilla-operator: cannot listen on %s (--%s): %s\n", addr.c_str(), what, error.c_str());
    std::exit(2);
  }
  std::printf("flotilla-operator: %s on %s:%d\n", what, host.c_str(), server->port());
  std::fflush(stdout);
  return server;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flotilla;
  Flags f;
  for (int i = 1; i < argc; ++i) {
    // --name value or --name=value (the form Helm charts and kubectl-style manifests use).
    std::string a = argv[i];
    std::optional<std::string> inline_value;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a.resize(eq);
    }
    auto value = [&](std::string& out) {
      if (inline_value) return out = *inline_value, true;
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    if (inline_value && (a == "--version" || a == "--leader-elect" || a == "--no-benefit-check" || a == "--no-preemption"))
      return usage("flag '" + a + "' takes no value");
    if (a == "--version") {
      std::printf("flotilla-operator %s\n", FLOTILLA_VERSION);
      return 0;
    } else if (a == "--leader-elect") {
      f.leader_elect = true;
    } else if (a == "--no-benefit-check") {
      f.benefit_check = false;
    } else if (a == "--no-preemption") {
      f.preemption = false;
    } else if ((a == "--benefit-threshold" && value(f.benefit_threshold)) ||
               (a == "--arrival-window-seconds" && value(f.arrival_window_seconds)) ||
               (a == "--min-rescale-interval-seconds" && value(f.min_rescale_interval_seconds)) ||
               (a == "--pod-start-timeout-seconds" && value(f.pod_start_timeout_seconds)) ||
               (a == "--restart-overhead-seconds" && value(f.restart_overhead_seconds))) {
    } else if ((a == "--kubeconfig" && value(f.kubeconfig)) || (a == "--namespace" && value(f.ns)) ||
               (a == "--metrics-addr" && value(f.metrics_addr)) || (a == "--health-addr" && value(f.health_addr)) ||
               (a == "--lease-name" && value(f.lease_name)) || (a == "--lease-namespace" && value(f.lease_namespace)) ||
               (a == "--sidecar-command" && value(f.sidecar_command)) ||
               (a == "--worker-service-account" && value(f.worker_service_account)) ||
               (a == "--gpu-catalog" && value(f.catalog))) {
    } else {
      return usage("unknown or incomplete flag '" + a + "'");
    }
  }
  // Flags are checked before the API server is contacted: a bad value fails fast, naming it.
  op::OperatorOptions options;
  options.ns = f.ns;
  options.pod_template.sidecar_command = split_words(f.sidecar_command);
  options.pod_template.service_account = f.worker_service_account;
  options.use_benefit_check = f.benefit_check;
  options.allow_preemption = f.preemption;
  if (!f.benefit_threshold.empty() &&
      !parse_number(f.benefit_threshold, 0, 1, options.policy.benefit_threshold))
    return usage("--benefit-threshold '" + f.benefit_threshold + "' is not a probability in [0, 1]");
  if (!f.arrival_window_seconds.empty() &&
      !parse_number(f.arrival_window_seconds, 1, 1e9, options.policy.window_seconds))
    return usage("--arrival-window-seconds '" + f.arrival_window_seconds + "' is not a number of seconds >= 1");
  if (!f.min_rescale_interval_seconds.empty() &&
      !parse_number(f.min_rescale_interval_seconds, 0, 1e9, options.policy.min_rescale_interval_seconds))
    return usage("--min-rescale-interval-seconds '" + f.min_rescale_interval_seconds +
                 "' is not a number of seconds >= 0");
  if (!f.pod_start_timeout_seconds.empty()) {
    double seconds = 0;
    if (!parse_number(f.pod_start_timeout_seconds, 0, 1e9, seconds) || seconds != static_cast<int>(seconds))
      return usage("--pod-start-timeout-seconds '" + f.pod_start_timeout_seconds +
                   "' is not a whole number of seconds >= 0");
    options.policy.pod_start_timeout_seconds = static_cast<int>(seconds);
  }
  options.arrival_window_s = options.policy.window_seconds;
  if (!f.restart_overhead_seconds.empty() &&
      !parse_number(f.restart_overhead_seconds, 0.001, 1e9, options.restart_overhead_s))
    return usage("--restart-overhead-seconds '" + f.restart_overhead_seconds + "' is not a number of seconds > 0");
  if (!f.catalog.empty()) {
    std::ifstream in(f.catalog);
    if (!in) return usage("cannot read --gpu-catalog '" + f.catalog + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    options.catalog_override_yaml = ss.str();
    // A catalog the operator cannot read must stop it, not leave it planning on the built-in one.
    auto checked = planner::apply_catalog_override(planner::builtin_gpu_catalog(), options.catalog_override_yaml);
    if (!checked) return usage("--gpu-catalog '" + f.catalog + "': " + checked.error());
  }
  auto config = f.kubeconfig.empty() ? kube::default_config() : kube::load_kubeconfig(f.kubeconfig);
  if (!config) return usage("no API server configuration: " + config.error().message);
  auto client = kube::Client::create(*config);
  if (!client) return usage("cannot create the API client: " + client.error().message);

  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  signal(SIGPIPE, SIG_IGN);

  op::Metrics metrics;
  op::Operator op(*client, options, metrics);
  std::atomic<bool> leading{!f.leader_elect};
  auto health = serve(
      f.health_addr,
      [&](const kube::net::HttpRequest& req, kube::net::ResponseWriter& w) {
        const std::string path = req.path();
        if (path == "/healthz")
          w.respond(200, "ok\n", "text/plain");
        else if (path == "/readyz")
          w.respond(op.ready() || (f.leader_elect && !leading) ? 200 : 503, "ready\n", "text/plain");
        else
          w.respond(404, "not found\n", "text/plain");
      },
      "health-addr");
  std::unique_ptr<kube::net::HttpServer> metrics_server;
  if (f.metrics_addr != "0")
    metrics_server = serve(
        f.metrics_addr,
        [&](const kube::net::HttpRequest& req, kube::net::ResponseWriter& w) {
          if (req.path() == "/metrics")
            w.respond(200, metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
          else
            w.respond(404, "not found\n", "text/plain");
        },
        "metrics-addr");

  if (!f.leader_elect) {
    metrics.set("flotilla_leader", {}, 1);
    std::printf("flotilla-operator: reconciling TrainingJobs in %s\n", f.ns.empty() ? "all namespaces" : f.ns.c_str());
    std::fflush(stdout);
    op.run(g_stop.get_token());
    return 0;
  }
  kube::LeaderElectionConfig le;
  le.lease_name = f.lease_name;
  le.lease_namespace = !f.lease_namespace.empty()                ? f.lease_namespace
                       : std::getenv("POD_NAMESPACE") != nullptr ? std::getenv("POD_NAMESPACE")
                                                                 : "default";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  le.identity = std::string(host) + "_" + std::to_string(getpid());
  le.on_started_leading = [&](std::stop_token stop) {
    leading = true;
    metrics.set("flotilla_leader", {}, 1);
    std::printf("flotilla-operator: leading as %s\n", le.identity.c_str());
    std::fflush(stdout);
    op.run(stop);
  };
  le.on_stopped_leading = [&] {
    leading = false;
    metrics.set("flotilla_leader", {}, 0);
  };
  while (!g_stop.stop_requested()) {
    kube::LeaderElector elector(*client, le);
    elector.run(g_stop.get_token());
  }
  return 0;
}
