// Softmax cross-entropy over V classes per row (CPU reference).
// forward:  probs[n,:] = softmax(logits[n,:]) (max-subtracted);
//           losses[n] = log(sum_j exp(l_j - max)) - (l_target - max)
// backward ACCUMULATES: dlogits[n,j] += (probs[n,j] - [j == target]) * dloss, where dloss is
// d(objective)/d(losses[n]) (the same for every row, e.g. 1/(N * micro-batches)).
#pragma once
#include <cstdint>

namespace flotilla::worker::ops {

template <class T>
void cross_entropy_forward(T* losses, T* probs, const T* logits, const std::int32_t* targets,
                           int N, int V);
template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets, T dloss,
                            int N, int V);

}  // namespace flotilla::worker::ops
