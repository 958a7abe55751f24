#include "worker/ops/gelu.h"
#include "worker/ops/exp.h"

#include <cmath>

namespace flotilla::worker::ops {

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

// tanh(u) = 1 - 2 / (exp(2u) + 1): glibc's tanhf goes through expm1f and was a fifth of a CPU
// training step; expf is several times cheaper. Saturates correctly (exp -> inf gives 1,
// exp -> 0 gives -1); absolute error stays at float rounding, which is what gelu needs.
template <class T>
T fast_tanh(T u) {
  return T(1) - T(2) / (op_exp(T(2) * u) + T(1));
}
}  // namespace

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n) {
  const T s = static_cast<T>(kSqrt2OverPi);
  const T k = static_cast<T>(kCubic);
  for (std::size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + fast_tanh(s * (x + k * x * x * x)));
  }
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n) {
  const T s = static_cast<T>(kSqrt2OverPi);
  const T k = static_cast<T>(kCubic);
  for (std::size_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T u = s * (x + k * x * x * x);
    const T th = fast_tanh(u);
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * s * (T(1) + T(3) * k * x * x);
    dinp[i] += grad * dout[i];
  }
}

template void gelu_forward<float>(float*, const float*, std::size_t);
template void gelu_forward<double>(double*, const double*, std::size_t);
template void gelu_backward<float>(float*, const float*, const float*, std::size_t);
template void gelu_backward<double>(double*, const double*, const double*, std::size_t);

}  // namespace flotilla::worker::ops
