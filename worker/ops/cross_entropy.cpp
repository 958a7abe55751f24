#include "worker/ops/cross_entropy.h"
#include "worker/ops/exp.h"

#include <cmath>

namespace flotilla::worker::ops {

template <class T>
void cross_entropy_forward(T* losses, T* probs, const T* logits, const std::int32_t* targets,
                           int N, int V) {
  for (int n = 0; n < N; ++n) {
    const T* l = logits + static_cast<long>(n) * V;
    T* p = probs + static_cast<long>(n) * V;
    T maxv = l[0];
    for (int j = 1; j < V; ++j)
      if (l[j] > maxv) maxv = l[j];
    // exp in its own loop so it vectorizes; the sum stays sequential (same bits).
    for (int j = 0; j < V; ++j) p[j] = op_exp(l[j] - maxv);
    T sum = 0;
    for (int j = 0; j < V; ++j) sum += p[j];
    const T inv = T(1) / sum;
    for (int j = 0; j < V; ++j) p[j] *= inv;
    losses[n] = std::log(sum) - (l[targets[n]] - maxv);
  }
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets, T dloss,
                            int N, int V) {
  for (int n = 0; n < N; ++n) {
    const T* p = probs + static_cast<long>(n) * V;
    T* d = dlogits + static_cast<long>(n) * V;
    const int y = targets[n];
    for (int j = 0; j < V; ++j) d[j] += (p[j] - (j == y ? T(1) : T(0))) * dloss;
  }
}

template void cross_entropy_forward<float>(float*, float*, const float*, const std::int32_t*,
                                           int, int);
template void cross_entropy_forward<double>(double*, double*, const double*, const std::int32_t*,
                                            int, int);
template void cross_entropy_backward<float>(float*, const float*, const std::int32_t*, float, int,
                                            int);
template void cross_entropy_backward<double>(double*, const double*, const std::int32_t*, double,
                                             int, int);

}  // namespace flotilla::worker::ops
