#include "worker/model/optimizer.h"

#include <cmath>

#include "worker/ops/adamw.h"

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
  ops::adamw_update(params, grads, m, v, decay_mask, n, lr, beta1, beta2, eps, weight_decay,
                    grad_scale, bias1, bias2);
}

}  // namespace flotilla::worker
