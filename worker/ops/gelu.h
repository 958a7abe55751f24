// GELU, tanh approximation (CPU reference):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// backward ACCUMULATES: dinp += gelu'(x) * dout.
#pragma once
#include <cstddef>

namespace flotilla::worker::ops {

template <class T>
void gelu_forward(T* out, const T* inp, std::size_t n);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n);

}  // namespace flotilla::worker::ops
