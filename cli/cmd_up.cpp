// `flotilla up` / `flotilla down`: the local harness (cli/local_cluster.h) from the command line.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/demo_live_view.h"
#include "cli/demo_observer.h"
#include "cli/local_cluster.h"
#include "kube/client.h"
#include "kube/config.h"

namespace {

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

int up_usage(const std::string& why) {
  std::fprintf(stderr,
               "flotilla up: %s\nusage: flotilla up --nodes FILE --dir DIR [--detach] [--no-benefit-check] "
               "[--gpu-catalog FILE]\n  starts devcluster with the virtual GPU nodes of FILE, installs the "
               "TrainingJob CRD and starts the operator; DIR/kubeconfig talks to it.\n  Without --detach it stays "
               "in the foreground until Ctrl-C, then stops everything.\n",
               why.c_str());
  return 2;
}

int run_up(const std::vector<std::string>& args) {
  flotilla::cli::UpOptions o;
  bool detach = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--detach")
      detach = true;
    else if (a == "--no-benefit-check")
      o.benefit_check = false;
    else if (a == "--nodes" && has_value)
      o.nodes_file = args[++i];
    else if (a == "--dir" && has_value)
      o.dir = args[++i];
    else if (a == "--gpu-catalog" && has_value)
      o.gpu_catalog = args[++i];
    else if (a == "--help" || a == "-h")
      return up_usage("help"), 0;
    else
      return up_usage("unknown or incomplete flag '" + a + "'");
  }
  if (o.nodes_file.empty()) return up_usage("--nodes FILE is required (see examples/devcluster-nodes.yaml)");
  if (o.dir.empty()) return up_usage("--dir DIR is required (state, logs and the kubeconfig go there)");
  const flotilla::cli::UpResult r = flotilla::cli::local_up(o);
  if (!r.ok) {
    std::fprintf(stderr, "flotilla up: %s\n", r.error.c_str());
    return 1;
  }
  std::printf(
      "flotilla up: devcluster (pid %d) and flotilla-operator (pid %d) are running.\n"
      "  export KUBECONFIG=%s\n  kubectl apply -f examples/trainingjob.yaml\n  kubectl get tj -w\n"
      "  metrics: http://127.0.0.1:%d/metrics\n  stop: flotilla down --dir %s\n",
      r.devcluster_pid, r.operator_pid, r.kubeconfig.c_str(), r.metrics_port, o.dir.c_str());
  std::fflush(stdout);
  if (detach) return 0;
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  // In the foreground: the live view (cli/demo_live_view.h) on a terminal, plain event lines otherwise.
  std::shared_ptr<flotilla::kube::Client> client;
  if (auto config = flotilla::kube::load_kubeconfig(r.kubeconfig))
    if (auto c = flotilla::kube::Client::create(*config)) client = *c;
  std::optional<flotilla::cli::DemoObserver> observer;
  if (client) observer.emplace(client);
  flotilla::cli::LiveView view(::isatty(STDOUT_FILENO), "flotilla up (Ctrl-C stops)");
  while (!g_interrupted) {
    if (observer) {
      observer->poll();
      view.render(*observer);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const std::string error = flotilla::cli::local_down(o.dir);
  if (!error.empty()) std::fprintf(stderr, "flotilla up: %s\n", error.c_str());
  return error.empty() ? 0 : 1;
}

int run_down(const std::vector<std::string>& args) {
  std::string dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--dir" && i + 1 < args.size())
      dir = args[++i];
    else {
      std::fprintf(stderr, "flotilla down: unknown flag '%s'\nusage: flotilla down --dir DIR\n", args[i].c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "flotilla down: --dir DIR is required\nusage: flotilla down --dir DIR\n");
    return 2;
  }
  const std::string error = flotilla::cli::local_down(dir);
  if (!error.empty()) {
    std::fprintf(stderr, "flotilla down: %s\n", error.c_str());
    return 1;
  }
  std::printf("flotilla down: stopped the local cluster in %s\n", dir.c_str());
  return 0;
}

const flotilla::cli::CommandRegistrar up_command{
    {"up", "start a local cluster: devcluster, the TrainingJob CRD and the operator", run_up}};
const flotilla::cli::CommandRegistrar down_command{{"down", "stop the local cluster `flotilla up` started", run_down}};

}  // namespace
