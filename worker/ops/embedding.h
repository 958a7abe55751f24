// Token + position embedding (CPU reference).
// forward:  out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
// backward: dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]
// Accumulation order: tokens in (b, t) order. Tokens must be in [0, V) (the caller checks).
#pragma once
#include <cstdint>

namespace flotilla::worker::ops {

template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, int B,
                       int Tn, int C);
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const std::int32_t* tokens, int B,
                        int Tn, int C);

}  // namespace flotilla::worker::ops
