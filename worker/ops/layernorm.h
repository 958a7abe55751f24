// LayerNorm over the last dimension (CPU reference), eps = 1e-5.
// forward:  mean = sum(x)/C, var = sum((x-mean)^2)/C, rstd = 1/sqrt(var+eps),
//           out = (x-mean)*rstd*w + b; saves mean[N], rstd[N].
// backward (accumulating): with xhat = (x-mean)*rstd, dnorm = dout*w:
//           db += dout, dw += dout*xhat,
//           dx += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm*xhat)).
// Sums over C run in index order in T precision.
#pragma once

namespace flotilla::worker::ops {

inline constexpr double kLayerNormEps = 1e-5;

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C);
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                        const T* weight, const T* mean, const T* rstd, int N, int C);

}  // namespace flotilla::worker::ops
