#include "worker/model/optimizer.h"

#include <cmath>

namespace flotilla::worker {

double total_sum_squares(std::span<const double> per_unit) {
  double total = 0.0;
  for (double s : per_unit) total += s;
  return total;
}

double grad_norm(std::span<const double> per_unit) { return std::sqrt(total_sum_squares(per_unit)); }

float clip_scale(double norm, float grad_clip_norm) {
  if (grad_clip_norm <= 0.0f) return 1.0f;
  const double scale = static_cast<double>(grad_clip_norm) / (norm + 1e-6);
  return scale < 1.0 ? static_cast<float>(scale) : 1.0f;
}

void adamw_cpu(float* params, const float* grads, float* m, float* v,
               const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1, float beta2,
               float eps, float weight_decay, float grad_scale, std::int64_t t) {
  const float bias1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(beta1), t));
  const float bias2 = 1.0f - static_cast<float>(std::pow(static_cast<double>(beta2), t));
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

}  // namespace flotilla::worker
