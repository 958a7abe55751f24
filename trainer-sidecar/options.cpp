#include "trainer-sidecar/options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace flotilla::sidecar {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

template <class T>
bool parse_number(const std::string& s, T& out) {
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v)) return false;
    out = static_cast<T>(v);
    return true;
  } else {
    auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  }
}

}  // namespace

std::string usage() {
  return "flotilla-sidecar [--kubeconfig FILE] [--pod-name NAME] [--namespace NS] "
         "[--worker-binary PATH] [--work-dir DIR] [--report-interval-ms MS] "
         "[--rendezvous-timeout-s S] [--max-restarts N] [--version]";
}

std::variant<Options, std::string> parse_options(const std::vector<std::string>& args) {
  Options o;
  std::map<std::string, std::string> kv;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--version") {
      o.version = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return "unexpected argument '" + a + "'; usage: " + usage();
    if (auto eq = a.find('='); eq != std::string::npos) {
      kv[a.substr(2, eq - 2)] = a.substr(eq + 1);
      continue;
    }
    if (i + 1 >= args.size()) return "flag " + a + " needs a value";
    kv[a.substr(2)] = args[++i];
  }
  auto take = [&](const char* name, auto& out) -> std::string {
    auto it = kv.find(name);
    if (it == kv.end()) return {};
    std::string value = it->second;
    kv.erase(it);
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>, std::string>) {
      out = value;
      return {};
    } else {
      if (!parse_number(value, out)) return std::string("--") + name + " '" + value + "' is not a valid number";
      return {};
    }
  };
  o.pod_name = env_or("POD_NAME", "");
  o.pod_namespace = env_or("POD_NAMESPACE", "");
  o.work_dir = env_or("FLOTILLA_POD_DIR", "");
  for (auto e : {take("kubeconfig", o.kubeconfig), take("pod-name", o.pod_name),
                 take("namespace", o.pod_namespace), take("worker-binary", o.worker_binary),
                 take("work-dir", o.work_dir), take("report-interval-ms", o.report_interval_ms),
                 take("rendezvous-timeout-s", o.rendezvous_timeout_s),
                 take("max-restarts", o.max_restarts)})
    if (!e.empty()) return e;
  if (!kv.empty()) return "unknown flag --" + kv.begin()->first + "; usage: " + usage();
  if (o.version) return o;
  if (o.pod_name.empty()) return std::string("no pod name: pass --pod-name or set $POD_NAME");
  if (o.report_interval_ms < 0) return std::string("--report-interval-ms must be >= 0");
  if (!(o.rendezvous_timeout_s > 0)) return std::string("--rendezvous-timeout-s must be positive");
  if (o.max_restarts < 0) return std::string("--max-restarts must be >= 0");
  if (o.work_dir.empty())
    o.work_dir = (std::filesystem::temp_directory_path() / ("flotilla-sidecar-" + o.pod_name)).string();
  return o;
}

kube::Result<kube::Config> load_config(const Options& options) {
  if (!options.kubeconfig.empty()) return kube::load_kubeconfig(options.kubeconfig);
  if (std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return kube::in_cluster_config();
  return kube::default_config();
}

}  // namespace flotilla::sidecar
