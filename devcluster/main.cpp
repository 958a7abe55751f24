// flotilla-devcluster: a local Kubernetes API server with virtual GPU nodes.
//
//   flotilla-devcluster --listen 127.0.0.1:PORT --nodes nodes.yaml --data-dir DIR --kubeconfig-out FILE
//                       [--watch-window EVENTS] [--watch-window-mib MIB] [--bookmark-interval-ms MS] [--gpu-catalog FILE]
//   flotilla-devcluster admin ACTION [ARGS] --kubeconfig FILE
//     fail-node NAME | recover-node NAME | cordon NAME | uncordon NAME | remove-node NAME
//     add-node NAME --gpu-type T --gpu-count N [--zone Z] | compact | watch-window EVENTS
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devcluster/devcluster.h"
#include "kube/config.h"
#include "kube/net/http_client.h"
#include "planner/gpu_catalog.h"

namespace {

int usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "flotilla-devcluster: " << problem << "\n";
  std::cerr << "usage: flotilla-devcluster --listen HOST:PORT --data-dir DIR [--nodes nodes.yaml] [--kubeconfig-out FILE]\n"
               "                           [--watch-window EVENTS] [--watch-window-mib MIB] [--bookmark-interval-ms MS]\n"
               "                           [--gpu-catalog FILE]  (its `emulated: true` GPU types: pods on such nodes run\n"
               "                           at that type's speed and within its memory, docs/devcluster.md)\n"
               "       flotilla-devcluster admin fail-node|recover-node|cordon|uncordon|remove-node NAME --kubeconfig FILE\n"
               "       flotilla-devcluster admin add-node NAME --gpu-type T --gpu-count N [--zone Z] --kubeconfig FILE\n"
               "       flotilla-devcluster admin compact|watch-window EVENTS --kubeconfig FILE\n";
  return 2;
}

// A whole-string integer in [min, max]; "5x", "-1" for a count, or "" are refused.
bool parse_int(const std::string& text, long long min, long long max, long long* out) {
  if (text.empty()) return false;
  try {
    size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used != text.size() || v < min || v > max) return false;
    *out = v;
    return true;
  } catch (...) {
    return false;
  }
}

// The catalog override's `emulated: true` types, by name (what a node's gpuType names).
std::string load_emulated_gpus(const std::string& file, std::map<std::string, flotilla::EmulatedGpu>* out) {
  std::ifstream in(file);
  if (!in) return "--gpu-catalog: cannot read '" + file + "'";
  std::stringstream text;
  text << in.rdbuf();
  auto catalog = flotilla::planner::apply_catalog_override(flotilla::planner::builtin_gpu_catalog(), text.str());
  if (!catalog.ok()) return "--gpu-catalog " + file + ": " + catalog.error();
  for (const flotilla::EmulatedGpu& gpu : flotilla::planner::emulated_gpus(catalog.value())) (*out)[gpu.type] = gpu;
  return "";
}

bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}

// Splits argv into positional words and --flag values.
bool parse_flags(int argc, char** argv, int from, std::vector<std::string>* words, std::map<std::string, std::string>* flags,
                 std::string* error) {
  for (int i = from; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      if (eq != std::string::npos) {
        (*flags)[a.substr(2, eq - 2)] = a.substr(eq + 1);
      } else if (i + 1 < argc) {
        (*flags)[a.substr(2)] = argv[++i];
      } else {
        *error = "flag " + a + " needs a value";
        return false;
      }
    } else {
      words->push_back(a);
    }
  }
  return true;
}

int run_admin(int argc, char** argv) {
  std::vector<std::string> words;
  std::map<std::string, std::string> flags;
  std::string error;
  if (!parse_flags(argc, argv, 2, &words, &flags, &error)) return usage(error);
  if (words.empty()) return usage("admin needs an action");
  std::string kubeconfig = flags.count("kubeconfig") ? flags["kubeconfig"] : (getenv("KUBECONFIG") ? getenv("KUBECONFIG") : "");
  if (kubeconfig.empty()) return usage("admin needs --kubeconfig FILE (or $KUBECONFIG)");
  auto kc = flotilla::kube::load_kubeconfig(kubeconfig);
  if (!kc) {
    std::cerr << "flotilla-devcluster: " << kc.error().message << "\n";
    return 1;
  }
  flotilla::kube::net::ClientConfig cfg;
  cfg.server = kc->server;
  cfg.tls.ca_pem = kc->ca_pem;
  cfg.tls.client_cert_pem = kc->client_cert_pem;
  cfg.tls.client_key_pem = kc->client_key_pem;
  cfg.tls.insecure_skip_verify = kc->insecure_skip_tls_verify;
  cfg.bearer_token = kc->bearer_token;
  auto client = flotilla::kube::net::HttpClient::create(cfg, &error);
  if (!client) {
    std::cerr << "flotilla-devcluster: " << error << "\n";
    return 1;
  }
  const std::string& action = words[0];
  std::string method = "POST", target;
  nlohmann::json body = nlohmann::json::object();
  auto need_name = [&]() -> bool { return words.size() == 2; };
  if (action == "fail-node" || action == "recover-node" || action == "cordon" || action == "uncordon") {
    if (!need_name()) return usage(action + " needs a node NAME");
    std::string verb = action == "fail-node" ? "fail" : action == "recover-node" ? "recover" : action;
    target = "/admin/nodes/" + words[1] + "/" + verb;
  } else if (action == "remove-node") {
    if (!need_name()) return usage("remove-node needs a node NAME");
    method = "DELETE";
    target = "/admin/nodes/" + words[1];
  } else if (action == "add-node") {
    if (!need_name()) return usage("add-node needs a node NAME");
    body["name"] = words[1];
    if (flags.count("gpu-type")) body["gpuType"] = flags["gpu-type"];
    long long gpus = 0;
    if (flags.count("gpu-count")) {
      if (!parse_int(flags["gpu-count"], 0, 1000000, &gpus))
        return usage("--gpu-count must be a non-negative integer, got '" + flags["gpu-count"] + "'");
      body["gpuCount"] = gpus;
    }
    if (flags.count("zone")) body["zone"] = flags["zone"];
    target = "/admin/nodes";
  } else if (action == "compact") {
    target = "/admin/compact";
  } else if (action == "watch-window") {
    if (!need_name()) return usage("watch-window needs EVENTS");
    long long events = 0;
    if (!parse_int(words[1], 1, std::numeric_limits<int>::max(), &events))
      return usage("watch-window EVENTS must be a positive integer, got '" + words[1] + "'");
    body["events"] = events;
    target = "/admin/watch-window";
  } else {
    return usage("unknown admin action '" + action + "'");
  }
  auto r = client->send(method, target, body.dump());
  if (!r.ok()) {
    std::cerr << "flotilla-devcluster: " << r.error << "\n";
    return 1;
  }
  if (r.response.status >= 300) {
    std::string message = r.response.body;
    try {
      message = nlohmann::json::parse(r.response.body).value("message", message);
    } catch (...) {
    }
    std::cerr << "flotilla-devcluster: " << action << " failed (" << r.response.status << "): " << message << "\n";
    return 1;
  }
  std::cout << action << ": ok\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Every thread started from here on (one per connection) gets a 64 MiB stack (virtual; only
  // what is touched is resident) instead of RLIMIT_STACK's: JSON up to kube-apiserver's
  // 10,000 nesting levels is copied, compared and dumped recursively (json_limits.h), which
  // needs about 2 MB in a release build and overflowed 8 MiB under AddressSanitizer.
  // The main thread (which loads the store) grows up to RLIMIT_STACK, checked as it grows.
  rlimit stack{};
  if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY && stack.rlim_cur < (rlim_t{64} << 20)) {
    stack.rlim_cur = stack.rlim_max == RLIM_INFINITY ? rlim_t{64} << 20 : std::min(stack.rlim_max, rlim_t{64} << 20);
    setrlimit(RLIMIT_STACK, &stack);
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setstacksize(&attr, size_t{64} << 20);
    pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
  }
  if (wants_help(argc, argv)) return usage(""), 0;
  if (argc >= 2 && std::string(argv[1]) == "admin") return run_admin(argc, argv);
  std::vector<std::string> words;
  std::map<std::string, std::string> flags;
  std::string error;
  if (!parse_flags(argc, argv, 1, &words, &flags, &error)) return usage(error);
  if (!words.empty()) return usage("unexpected argument '" + words[0] + "'");
  for (const auto& [k, v] : flags)
    if (k != "listen" && k != "nodes" && k != "data-dir" && k != "kubeconfig-out" && k != "watch-window" &&
        k != "watch-window-mib" && k != "bookmark-interval-ms" && k != "gpu-catalog")
      return usage("unknown flag --" + k);
  flotilla::devcluster::DevclusterOptions options;
  if (flags.count("listen")) options.listen = flags["listen"];
  if (flags.count("nodes")) options.nodes_file = flags["nodes"];
  if (flags.count("data-dir")) options.data_dir = flags["data-dir"];
  if (flags.count("kubeconfig-out")) options.kubeconfig_out = flags["kubeconfig-out"];
  if (flags.count("gpu-catalog")) {
    if (std::string e = load_emulated_gpus(flags["gpu-catalog"], &options.emulated_gpus); !e.empty()) return usage(e);
  }
  long long value = 0;
  if (flags.count("watch-window")) {
    if (!parse_int(flags["watch-window"], 1, std::numeric_limits<int>::max(), &value))
      return usage("--watch-window must be a positive integer (events), got '" + flags["watch-window"] + "'");
    options.watch_window_events = static_cast<size_t>(value);
  }
  if (flags.count("watch-window-mib")) {
    if (!parse_int(flags["watch-window-mib"], 1, 1 << 20, &value))
      return usage("--watch-window-mib must be a positive integer (MiB), got '" + flags["watch-window-mib"] + "'");
    options.watch_window_bytes = static_cast<size_t>(value) << 20;
  }
  if (flags.count("bookmark-interval-ms")) {
    if (!parse_int(flags["bookmark-interval-ms"], 1, 3600000, &value))
      return usage("--bookmark-interval-ms must be a positive integer (milliseconds), got '" +
                   flags["bookmark-interval-ms"] + "'");
    options.bookmark_interval_ms = static_cast<int>(value);
  }
  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  flotilla::devcluster::Devcluster cluster;
  if (!cluster.start(options, &error)) {
    std::cerr << "flotilla-devcluster: " << error << "\n";
    cluster.stop();
    return 1;
  }
  std::cout << "devcluster serving " << cluster.server_url() << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::cout << "devcluster stopping (" << strsignal(sig) << ")" << std::endl;
  cluster.stop();
  return 0;
}
