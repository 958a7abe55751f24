#include "worker/ops/embedding.h"

namespace flotilla::worker::ops {

template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B,
                       int Tn, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      T* o = out + (static_cast<long>(b) * Tn + t) * C;
      const T* we = wte + static_cast<long>(tokens[b * Tn + t]) * C;
      const T* pe = wpe + static_cast<long>(t) * C;
      for (int c = 0; c < C; ++c) o[c] = we[c] + pe[c];
    }
  }
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B,
                        int Tn, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      const T* d = dout + (static_cast<long>(b) * Tn + t) * C;
      T* dwe = dwte + static_cast<long>(tokens[b * Tn + t]) * C;
      T* dpe = dwpe + static_cast<long>(t) * C;
      for (int c = 0; c < C; ++c) {
        dwe[c] += d[c];
        dpe[c] += d[c];
      }
    }
  }
}

template void embedding_forward<float>(float*, const std::int32_t*, const float*, const float*,
                                       int, int, int);
template void embedding_forward<double>(double*, const std::int32_t*, const double*,
                                        const double*, int, int, int);
template void embedding_backward<float>(float*, float*, const float*, const std::int32_t*, int,
                                        int, int);
template void embedding_backward<double>(double*, double*, const double*, const std::int32_t*,
                                         int, int, int);

}  // namespace flotilla::worker::ops
