// The sidecar's command line.
//
// Guarantees: parse_options() fills every field from flags, then from the environment
//   ($POD_NAME, $POD_NAMESPACE, $FLOTILLA_POD_DIR), then from defaults; anything malformed is
//   one line naming the flag. --version sets `version`.
// Assumes: flags are "--name value" pairs (or "--name=value").
// Caveats: reads the environment; the kube config is loaded later (load_config()).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "kube/config.h"
#include "kube/error.h"

namespace flotilla::sidecar {

struct Options {
  std::string kubeconfig;  // "" = in-cluster, else $KUBECONFIG
  std::string pod_name, pod_namespace;
  std::string worker_binary = "flotilla-worker";
  std::string work_dir;
  std::int64_t report_interval_ms = 2000;
  double rendezvous_timeout_s = 60;
  int max_restarts = 3;
  bool version = false;
};

std::variant<Options, std::string> parse_options(const std::vector<std::string>& args);
std::string usage();
// --kubeconfig, else in-cluster config, else $KUBECONFIG / ~/.kube/config.
kube::Result<kube::Config> load_config(const Options& options);

}  // namespace flotilla::sidecar
