// FlexTrain's modeling-based throughput prediction (§4.4.1, eqs. 5 and 6).
//
// T_total = (m·v + p − 1)·(t_F^l + t_B^l)   if m >= p
//         = (p·v + m − 1)·(t_F^l + t_B^l)   if m <  p
// with v = ceil(L/p) virtual stages of one layer each and m = B/d micro-batches per pipeline.
//
// Guarantees: pure; returns nullopt (never divides by zero or crashes) when the layout is
//   infeasible by hyper-parameters: B not divisible by d, p > L, or any degree < 1.
// Caveats: communication is assumed overlapped, micro-batch size 1 (as the paper assumes).
#pragma once

#include <optional>

namespace flotilla::scaler {

std::optional<double> modeled_iteration_s(int pipeline_layers, int global_batch, int dp, int pp,
                                          double layer_fwd_bwd_s);

}  // namespace flotilla::scaler
