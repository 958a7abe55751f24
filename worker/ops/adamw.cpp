#include "worker/ops/adamw.h"

#include <cmath>

namespace flotilla::worker::ops {

void adamw_update(float* __restrict params, const float* __restrict grads, float* __restrict m,
                  float* __restrict v, const std::uint8_t* __restrict decay_mask, std::size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay,
                  float grad_scale, float bias1, float bias2) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bias1;
    const float vhat = vi / bias2;
    const float wd = decay_mask[i] ? weight_decay : 0.0f;
    params[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * params[i]);
  }
}

}  // namespace flotilla::worker::ops
