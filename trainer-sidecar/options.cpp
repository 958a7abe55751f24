#include "trainer-sidecar/options.h"

#include "common/flag_map.h"

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

}  // namespace

std::string usage() {
  return "flotilla-sidecar [--kubeconfig FILE] [--pod-name NAME] [--namespace NS] "
         "[--worker-binary PATH] [--work-dir DIR] [--report-interval-ms MS] "
         "[--rendezvous-timeout-s S] [--max-restarts N] [--version]";
}

std::variant<Options, std::string> parse_options(const std::vector<std::string>& args) {
  Options o;
  FlagMap flags;
  if (std::string e = flags.collect(args, usage(), /*allow_equals=*/true, {"--version"}); !e.empty()) return e;
  o.version = flags.switched("--version");
  auto take = [&](const char* name, auto& out) { return flags.take(name, out); };
  o.pod_name = env_or("POD_NAME", "");
  o.pod_namespace = env_or("POD_NAMESPACE", "");
  o.work_dir = env_or("FLOTILLA_POD_DIR", "");
  for (auto e : {take("kubeconfig", o.kubeconfig), take("pod-name", o.pod_name),
                 take("namespace", o.pod_namespace), take("worker-binary", o.worker_binary),
                 take("work-dir", o.work_dir), take("report-interval-ms", o.report_interval_ms),
                 take("rendezvous-timeout-s", o.rendezvous_timeout_s),
                 take("max-restarts", o.max_restarts)})
    if (!e.empty()) return e;
  if (std::string e = flags.unknown(usage()); !e.empty()) return e;
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
