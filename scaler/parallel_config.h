// One parallel layout of an elastic job: DP x PP x TP x CP GPUs, micro-batch size 1.
//
// Guarantees: gpus() = dp*pp*tp*cp. Plain value type, cheap to copy and compare.
// Assumes: micro-batch size 1 (FlexTrain §4.4.1 "aligned with mainstream practices"), so the
//   number of micro-batches per pipeline is m = global_batch / dp (eq. 6).
#pragma once

#include <string>

namespace flotilla::scaler {

struct ParallelConfig {
  int dp = 1;  // data-parallel replicas
  int pp = 1;  // pipeline stages
  int tp = 1;  // tensor-parallel GPUs per stage replica
  int cp = 1;  // context-parallel GPUs (sequence split), FlexTrain's long-context jobs

  int gpus() const { return dp * pp * tp * cp; }
  bool operator==(const ParallelConfig&) const = default;
  std::string to_string() const {
    return "dp" + std::to_string(dp) + "/pp" + std::to_string(pp) + "/tp" + std::to_string(tp) +
           "/cp" + std::to_string(cp);
  }
};

}  // namespace flotilla::scaler
