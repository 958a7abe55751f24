#include "scaler/modeling_predictor.h"

namespace flotilla::scaler {

std::optional<double> modeled_iteration_s(int pipeline_layers, int global_batch, int dp, int pp,
                                          double layer_fwd_bwd_s) {
  if (pipeline_layers < 1 || global_batch < 1 || dp < 1 || pp < 1) return std::nullopt;
  if (pp > pipeline_layers || global_batch % dp != 0) return std::nullopt;
  const long long m = global_batch / dp;                           // eq. 6
  const long long v = (pipeline_layers + pp - 1) / pp;             // v = ceil(L/p)
  const long long slots = m >= pp ? m * v + pp - 1 : pp * v + m - 1;  // eq. 5
  return static_cast<double>(slots) * layer_fwd_bwd_s;
}

}  // namespace flotilla::scaler
