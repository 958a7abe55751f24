#include "worker/ops/layernorm.h"

#include <cmath>

namespace flotilla::worker::ops {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<long>(n) * C;
    T sum = 0;
    for (int c = 0; c < C; ++c) sum += x[c];
    const T m = sum / static_cast<T>(C);
    T var = 0;
    for (int c = 0; c < C; ++c) {
      const T d = x[c] - m;
      var += d * d;
    }
    var /= static_cast<T>(C);
    const T s = static_cast<T>(1) / std::sqrt(var + static_cast<T>(kLayerNormEps));
    T* o = out + static_cast<long>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                        const T* weight, const T* mean, const T* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<long>(n) * C;
    const T* d = dout + static_cast<long>(n) * C;
    T* dx = dinp + static_cast<long>(n) * C;
    const T m = mean[n];
    const T s = rstd[n];
    T dnorm_mean = 0;
    T dnorm_xhat_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T xhat = (x[c] - m) * s;
      const T dnorm = weight[c] * d[c];
      dnorm_mean += dnorm;
      dnorm_xhat_mean += dnorm * xhat;
    }
    dnorm_mean /= static_cast<T>(C);
    dnorm_xhat_mean /= static_cast<T>(C);
    for (int c = 0; c < C; ++c) {
      const T xhat = (x[c] - m) * s;
      const T dnorm = weight[c] * d[c];
      dbias[c] += d[c];
      dweight[c] += xhat * d[c];
      dx[c] += (dnorm - dnorm_mean - xhat * dnorm_xhat_mean) * s;
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*,
                                        const double*, int, int);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int);
template void layernorm_backward<double>(double*, double*, double*, const double*,
                                         const double*, const double*, const double*,
                                         const double*, int, int);

}  // namespace flotilla::worker::ops
