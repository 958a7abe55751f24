// Causal multi-head self-attention (CPU reference), scale 1/sqrt(head_dim).
// qkv [B,T,3C]: q = qkv[..., 0:C], k = qkv[..., C:2C], v = qkv[..., 2C:3C]; head h uses
// columns h*hs .. (h+1)*hs-1 of each. out [B,T,C]. att [B,NH,T,T] saves the softmax (zero above
// the diagonal). backward ACCUMULATES into dqkv. Sums run in ascending index order.
#pragma once

namespace flotilla::worker::ops {

template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int NH);
template <class T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int NH);

}  // namespace flotilla::worker::ops
