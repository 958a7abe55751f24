// FLOP and optimizer-time counts of a transformer block: the one formula the planner's
// FLOP-based time model (planner/profile.cpp, estimate_block_times) and the worker's emulated
// GPU pacing (worker/runtime/emulated_pace.h) both use, so the planner predicts what an
// emulated GPU measures.
//
// Guarantees: pure constexpr arithmetic; no I/O.
// Assumes: dense matmul FLOPs = 2 x multiply-adds; attention scores and the weighted sum over
//   values are counted for a full (not causal-halved) s x s matrix, as Megatron's and Sailor's
//   FLOP counts do; the backward pass costs twice the forward; AdamW is memory bound at 32 bytes
//   moved per parameter (fp32 weight, grad, m, v read and written).
// Caveats: a count, not a measurement; layer norms, GELU and softmax are left out (small next to
//   the matmuls for the shapes planned).
#pragma once

namespace flotilla {

// One transformer layer, one sequence of seq_len tokens: QKV (q query and kv key/value widths),
// the output projection, mlp_matrices matrices of hidden x ffn (2 for GPT, 3 for SwiGLU) and the
// two attention products.
constexpr double transformer_layer_forward_flops(double seq_len, double hidden, double q_width, double kv_width,
                                                 double ffn_hidden, double mlp_matrices) {
  const double matmul =
      2.0 * seq_len * (hidden * (q_width + 2 * kv_width) + q_width * hidden + mlp_matrices * hidden * ffn_hidden);
  const double attention = 2.0 * 2.0 * seq_len * seq_len * q_width;  // QK^T and AV
  return matmul + attention;
}

// The LM head's projection onto the vocabulary, one sequence.
constexpr double lm_head_forward_flops(double seq_len, double head_matrix_params) {
  return 2.0 * seq_len * head_matrix_params;
}

inline constexpr double kBackwardPerForwardFlops = 2.0;

// One AdamW step over `params` parameters on memory of the given bandwidth (0: not modelled).
constexpr double optimizer_update_seconds(double params, double memory_bandwidth_bytes_per_s) {
  return memory_bandwidth_bytes_per_s > 0 ? params * 32.0 / memory_bandwidth_bytes_per_s : 0.0;
}

}  // namespace flotilla
