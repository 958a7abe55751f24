#include "worker/ops/attention.h"
#include "worker/ops/exp.h"

#include <cmath>
#include <vector>

namespace flotilla::worker::ops {

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (static_cast<long>(b) * Tn + t) * C3 + h * hs;
        T* a = att + ((static_cast<long>(b) * NH + h) * Tn + t) * Tn;
        T maxv = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* k = qkv + (static_cast<long>(b) * Tn + t2) * C3 + C + h * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          s *= scale;
          a[t2] = s;
          if (s > maxv) maxv = s;
        }
        // exp in its own loop so it vectorizes; the sum stays sequential (same bits).
        for (int t2 = 0; t2 <= t; ++t2) a[t2] = op_exp(a[t2] - maxv);
        T sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += a[t2];
        const T inv = T(1) / sum;
        for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
        for (int t2 = t + 1; t2 < Tn; ++t2) a[t2] = 0;
        T* o = out + (static_cast<long>(b) * Tn + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const T* v = qkv + (static_cast<long>(b) * Tn + t2) * C3 + 2 * C + h * hs;
          const T p = a[t2];
          for (int i = 0; i < hs; ++i) o[i] += p * v[i];
        }
      }
    }
  }
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  std::vector<T> datt(Tn);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* a = att + ((static_cast<long>(b) * NH + h) * Tn + t) * Tn;
        const T* d = dout + (static_cast<long>(b) * Tn + t) * C + h * hs;
        const T* q = qkv + (static_cast<long>(b) * Tn + t) * C3 + h * hs;
        T* dq = dqkv + (static_cast<long>(b) * Tn + t) * C3 + h * hs;
        // out = sum_t2 a[t2] v[t2]  =>  datt[t2] = d . v[t2], dv[t2] += a[t2] d
        T dot_pa = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const long row = (static_cast<long>(b) * Tn + t2) * C3;
          const T* v = qkv + row + 2 * C + h * hs;
          T* dv = dqkv + row + 2 * C + h * hs;
          T s = 0;
          for (int i = 0; i < hs; ++i) s += d[i] * v[i];
          datt[t2] = s;
          dot_pa += a[t2] * s;
          const T p = a[t2];
          for (int i = 0; i < hs; ++i) dv[i] += p * d[i];
        }
        // softmax: dpre[t2] = a[t2] * (datt[t2] - sum_j a[j] datt[j]); pre = scale * q.k
        for (int t2 = 0; t2 <= t; ++t2) {
          const T dpre = a[t2] * (datt[t2] - dot_pa) * scale;
          const long row = (static_cast<long>(b) * Tn + t2) * C3;
          const T* k = qkv + row + C + h * hs;
          T* dk = dqkv + row + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, const float*, const float*, const float*, int,
                                        int, int, int);
template void attention_backward<double>(double*, const double*, const double*, const double*,
                                         int, int, int, int);

}  // namespace flotilla::worker::ops
