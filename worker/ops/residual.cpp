#include "worker/ops/residual.h"

namespace flotilla::worker::ops {

template <class T>
void residual_forward(T* out, const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T>
void residual_backward(T* da, T* db, const T* dout, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

template void residual_forward<float>(float*, const float*, const float*, std::size_t);
template void residual_forward<double>(double*, const double*, const double*, std::size_t);
template void residual_backward<float>(float*, float*, const float*, std::size_t);
template void residual_backward<double>(double*, double*, const double*, std::size_t);

}  // namespace flotilla::worker::ops
