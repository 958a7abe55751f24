// AdamW with global-norm gradient clipping, reduced in a partition-free order.
//
// Per parameter p with grad g (after the clip scale s), step t = step + 1 (1-based):
//   g  = g * s
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   mh = m / (1 - beta1^t),  vh = v / (1 - beta2^t)
//   p  = p - lr * (mh / (sqrt(vh) + eps) + wd * p)      (wd only where the tensor decays)
// Clip scale: s = min(1, clip / (norm + 1e-6)) with norm = sqrt(sum of per-unit sums of squares
// added in unit index order, in double). clip <= 0 means s = 1.
// Contract: pure functions; clip_scale() of the same per-unit values in the same order is
// bit-identical on every rank and every layout.
#pragma once

#include <cstdint>
#include <span>

#include "worker/model/config.h"

namespace flotilla::worker {

// Adds per-unit sums of squares in the given (unit index) order, starting from 0.0.
double total_sum_squares(std::span<const double> per_unit_in_unit_order);
double grad_norm(std::span<const double> per_unit_in_unit_order);
float clip_scale(double norm, float grad_clip_norm);

// CPU reference of one AdamW step over n parameters (the Backend::adamw contract).
void adamw_cpu(float* params, const float* grads, float* m, float* v,
               const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1, float beta2,
               float eps, float weight_decay, float grad_scale, std::int64_t t);

}  // namespace flotilla::worker
