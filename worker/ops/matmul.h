// Dense layer (CPU reference): out[N,OUT] = inp[N,IN] @ weight[IN,OUT] (+ bias[OUT]).
// Weights are [IN, OUT] row-major so the inner loop runs over contiguous outputs: it
// vectorizes without reassociating any sum, so results are bit-identical at any -O level and
// any SIMD width (fp contraction is off for worker/ops).
// Summation order (the determinism contract):
//   out[n,o]  = bias[o] + x[n,0]*w[0,o] + x[n,1]*w[1,o] + ...           (i ascending)
//   dinp[n,i] += (dout[n,0]*w[i,0] + dout[n,1]*w[i,1] + ...)            (o ascending, then added)
//   dweight[i,o] accumulates x[n,i]*dout[n,o] for n ascending; dbias[o] likewise.
#pragma once

namespace flotilla::worker::ops {

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int IN,
                    int OUT);
// dinp, dbias may be nullptr (skipped).
// On x86-64 CPUs with AVX2 the float kernels use 32-byte vectors, otherwise 16-byte (SSE2);
// both run the identical per-element operations in the identical order (no FMA), so results
// are the same bits. matmul_use_avx2(false) forces SSE2 (tests use it to check exactly that);
// returns whether AVX2 is now in use.
bool matmul_use_avx2(bool allow);
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int IN, int OUT);

}  // namespace flotilla::worker::ops
