#include "scaler/restart_overhead.h"

#include <algorithm>

namespace flotilla::scaler {

RestartOverhead estimate_restart_overhead(double checkpoint_bytes, int gpus_before,
                                          int gpus_after, std::optional<double> measured_restart_s,
                                          const RestartOverheadParams& params) {
  RestartOverhead out;
  if (measured_restart_s && *measured_restart_s >= 0) {
    out.init_s = *measured_restart_s;
    out.measured = true;
    return out;
  }
  const int per_node = std::max(1, params.gpus_per_node);
  const double nodes_before = std::max(1, (gpus_before + per_node - 1) / per_node);
  const double nodes_after = std::max(1, (gpus_after + per_node - 1) / per_node);
  const double bw = std::max(1.0, params.storage_bytes_per_s_per_node);
  const double bytes = std::max(0.0, checkpoint_bytes);
  out.save_s = bytes / (nodes_before * bw);
  out.load_s = bytes / (nodes_after * bw);
  out.init_s = std::max(0.0, params.init_base_s + params.init_per_node_s * nodes_after);
  return out;
}

}  // namespace flotilla::scaler
