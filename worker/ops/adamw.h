// AdamW update over a flat parameter buffer (CPU reference). See worker/model/optimizer.h for
// the formula; bias1 = 1 - beta1^t and bias2 = 1 - beta2^t are passed in (computed once in
// double by the caller). Element-wise only, so vectorizing it changes no bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace flotilla::worker::ops {

void adamw_update(float* params, const float* grads, float* m, float* v,
                  const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, float bias1,
                  float bias2);

}  // namespace flotilla::worker::ops
