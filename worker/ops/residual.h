// Residual add (CPU reference): out = a + b; backward ACCUMULATES da += dout, db += dout.
#pragma once
#include <cstddef>

namespace flotilla::worker::ops {

template <class T>
void residual_forward(T* out, const T* a, const T* b, std::size_t n);
template <class T>
void residual_backward(T* da, T* db, const T* dout, std::size_t n);

}  // namespace flotilla::worker::ops
