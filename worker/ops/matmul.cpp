#include "worker/ops/matmul.h"

#include <vector>

namespace flotilla::worker::ops {

template <class T>
void matmul_forward(T* __restrict out, const T* __restrict inp, const T* __restrict weight,
                    const T* __restrict bias, int N, int IN, int OUT) {
  constexpr int kRows = 4;  // rows per tile: each weight row is loaded once per tile
  int n = 0;
  for (; n + kRows <= N; n += kRows) {
    T* __restrict o0 = out + static_cast<long>(n) * OUT;
    T* __restrict o1 = o0 + OUT;
    T* __restrict o2 = o1 + OUT;
    T* __restrict o3 = o2 + OUT;
    for (int o = 0; o < OUT; ++o) {
      const T b = bias ? bias[o] : T(0);
      o0[o] = b;
      o1[o] = b;
      o2[o] = b;
      o3[o] = b;
    }
    const T* x0 = inp + static_cast<long>(n) * IN;
    const T* x1 = x0 + IN;
    const T* x2 = x1 + IN;
    const T* x3 = x2 + IN;
    for (int i = 0; i < IN; ++i) {
      const T* __restrict w = weight + static_cast<long>(i) * OUT;
      const T a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
      for (int o = 0; o < OUT; ++o) {
        const T wo = w[o];
        o0[o] += a0 * wo;
        o1[o] += a1 * wo;
        o2[o] += a2 * wo;
        o3[o] += a3 * wo;
      }
    }
  }
  for (; n < N; ++n) {
    T* __restrict o0 = out + static_cast<long>(n) * OUT;
    for (int o = 0; o < OUT; ++o) o0[o] = bias ? bias[o] : T(0);
    const T* x0 = inp + static_cast<long>(n) * IN;
    for (int i = 0; i < IN; ++i) {
      const T* __restrict w = weight + static_cast<long>(i) * OUT;
      const T a0 = x0[i];
      for (int o = 0; o < OUT; ++o) o0[o] += a0 * w[o];
    }
  }
}

template <class T>
void matmul_backward(T* __restrict dinp, T* __restrict dweight, T* __restrict dbias,
                     const T* __restrict dout, const T* __restrict inp,
                     const T* __restrict weight, int N, int IN, int OUT) {
  if (dinp) {
    // weight^T [OUT, IN] so that dinp rows are built with contiguous, vectorizable updates.
    std::vector<T> wt(static_cast<std::size_t>(IN) * OUT);
    for (int i = 0; i < IN; ++i)
      for (int o = 0; o < OUT; ++o) wt[static_cast<std::size_t>(o) * IN + i] = weight[static_cast<long>(i) * OUT + o];
    std::vector<T> row(IN);
    for (int n = 0; n < N; ++n) {
      T* __restrict r = row.data();
      for (int i = 0; i < IN; ++i) r[i] = T(0);
      const T* d = dout + static_cast<long>(n) * OUT;
      for (int o = 0; o < OUT; ++o) {
        const T* __restrict w = wt.data() + static_cast<std::size_t>(o) * IN;
        const T g = d[o];
        for (int i = 0; i < IN; ++i) r[i] += g * w[i];
      }
      T* __restrict dx = dinp + static_cast<long>(n) * IN;
      for (int i = 0; i < IN; ++i) dx[i] += r[i];
    }
  }
  constexpr int kRows = 4;
  int n = 0;
  for (; n + kRows <= N; n += kRows) {
    const T* __restrict d0 = dout + static_cast<long>(n) * OUT;
    const T* __restrict d1 = d0 + OUT;
    const T* __restrict d2 = d1 + OUT;
    const T* __restrict d3 = d2 + OUT;
    const T* x0 = inp + static_cast<long>(n) * IN;
    const T* x1 = x0 + IN;
    const T* x2 = x1 + IN;
    const T* x3 = x2 + IN;
    for (int i = 0; i < IN; ++i) {
      T* __restrict dw = dweight + static_cast<long>(i) * OUT;
      const T a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
      for (int o = 0; o < OUT; ++o) {
        T acc = dw[o];
        acc += a0 * d0[o];
        acc += a1 * d1[o];
        acc += a2 * d2[o];
        acc += a3 * d3[o];
        dw[o] = acc;
      }
    }
    if (dbias) {
      for (int o = 0; o < OUT; ++o) {
        T acc = dbias[o];
        acc += d0[o];
        acc += d1[o];
        acc += d2[o];
        acc += d3[o];
        dbias[o] = acc;
      }
    }
  }
  for (; n < N; ++n) {
    const T* __restrict d0 = dout + static_cast<long>(n) * OUT;
    const T* x0 = inp + static_cast<long>(n) * IN;
    for (int i = 0; i < IN; ++i) {
      T* __restrict dw = dweight + static_cast<long>(i) * OUT;
      const T a0 = x0[i];
      for (int o = 0; o < OUT; ++o) dw[o] += a0 * d0[o];
    }
    if (dbias)
      for (int o = 0; o < OUT; ++o) dbias[o] += d0[o];
  }
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int,
                                    int);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int,
                                     int, int);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*,
                                     const float*, int, int, int);
template void matmul_backward<double>(double*, double*, double*, const double*, const double*,
                                      const double*, int, int, int);

}  // namespace flotilla::worker::ops
