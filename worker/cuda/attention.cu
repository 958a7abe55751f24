// Causal multi-head attention on the GPU (the llm.c shape): permute qkv to per-head q, k, v
// [B,NH,T,HS]; pre = scale * q k^T and y = att v as strided-batched cuBLAS GEMMs; a warp-per-row
// causal softmax; unpermute y to [B,T,C]. Backward recomputes the permutation from the saved
// qkv and mirrors each step. Row-major [T,HS] per head is column-major [HS,T], ld HS.
#include <cmath>

#include "worker/cuda/common.cuh"
#include "worker/cuda/gemm_plan.h"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

// Thread idx as an element (b, h, t, d) of a [B,NH,T,HS] tensor; false past the end.
struct HeadIndex {
  int b, h, t, d;
};
__device__ inline bool head_index(std::size_t idx, int B, int T, int NH, int HS, HeadIndex* out) {
  if (idx >= static_cast<std::size_t>(B) * NH * T * HS) return false;
  out->d = static_cast<int>(idx % HS);
  out->t = static_cast<int>((idx / HS) % T);
  out->h = static_cast<int>((idx / (static_cast<std::size_t>(HS) * T)) % NH);
  out->b = static_cast<int>(idx / (static_cast<std::size_t>(HS) * T * NH));
  return true;
}

// qkv [B,T,3,NH,HS] -> q,k,v [B,NH,T,HS]
__global__ void permute_kernel(float* q, float* k, float* v, const float* qkv, int B, int T,
                               int NH, int HS) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  HeadIndex i;
  if (!head_index(idx, B, T, NH, HS, &i)) return;
  const int C = NH * HS;
  const std::size_t src = (static_cast<std::size_t>(i.b) * T + i.t) * 3 * C + i.h * HS + i.d;
  q[idx] = qkv[src];
  k[idx] = qkv[src + C];
  v[idx] = qkv[src + 2 * C];
}

// dqkv += scatter of dq, dk, dv
__global__ void permute_backward_kernel(float* dqkv, const float* dq, const float* dk,
                                        const float* dv, int B, int T, int NH, int HS) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  HeadIndex i;
  if (!head_index(idx, B, T, NH, HS, &i)) return;
  const int C = NH * HS;
  const std::size_t dst = (static_cast<std::size_t>(i.b) * T + i.t) * 3 * C + i.h * HS + i.d;
  dqkv[dst] += dq[idx];
  dqkv[dst + C] += dk[idx];
  dqkv[dst + 2 * C] += dv[idx];
}

// y [B,NH,T,HS] -> out [B,T,NH,HS] (forward), and back (backward: dy = unpermute^-1(dout)).
__global__ void unpermute_kernel(float* out, const float* y, int B, int T, int NH, int HS,
                                 bool inverse) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  HeadIndex i;
  if (!head_index(idx, B, T, NH, HS, &i)) return;
  const std::size_t o = (static_cast<std::size_t>(i.b) * T + i.t) * NH * HS + i.h * HS + i.d;
  if (inverse)
    out[idx] = y[o];
  else
    out[o] = y[idx];
}

// One warp per (b, h, t) row; in place on att: pre-softmax scores -> causal softmax.
__global__ void causal_softmax_kernel(float* att, int rows, int T) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % T;
  float* a = att + static_cast<std::size_t>(row) * T;
  float maxv = -INFINITY;
  for (int j = lane; j <= t; j += 32) maxv = fmaxf(maxv, a[j]);
  maxv = warp_max(maxv);
  float sum = 0.f;
  for (int j = lane; j <= t; j += 32) {
    const float e = expf(a[j] - maxv);
    a[j] = e;
    sum += e;
  }
  const float inv = 1.f / warp_sum(sum);
  for (int j = lane; j < T; j += 32) a[j] = j <= t ? a[j] * inv : 0.f;
}

// dpre = att * (datt - sum_j att_j datt_j) * scale, in place on datt.
__global__ void softmax_backward_kernel(float* datt, const float* att, int rows, int T,
                                        float scale) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int t = row % T;
  const float* a = att + static_cast<std::size_t>(row) * T;
  float* d = datt + static_cast<std::size_t>(row) * T;
  float dot = 0.f;
  for (int j = lane; j <= t; j += 32) dot += a[j] * d[j];
  dot = warp_sum(dot);
  for (int j = lane; j < T; j += 32) d[j] = j <= t ? a[j] * (d[j] - dot) * scale : 0.f;
}

}  // namespace

void attention_forward(cublasContext* handle, float* out, float* att, const float* qkv, int B,
                       int T, int C, int NH) {
  const int HS = C / NH;
  const std::size_t n = static_cast<std::size_t>(B) * T * C;
  float* scratch = static_cast<float*>(scratch_alloc(4 * n * sizeof(float)));
  float *q = scratch, *k = q + n, *v = k + n, *y = v + n;
  permute_kernel<<<blocks_for(n, 256), 256>>>(q, k, v, qkv, B, T, NH, HS);
  FLOTILLA_CUDA_LAUNCHED("attention_forward(permute)");
  const float scale = 1.f / std::sqrt(static_cast<float>(HS));
  run_gemm(handle, attention_scores_gemm(B, T, NH, HS, scale), k, q, att);
  const int rows = B * NH * T;
  causal_softmax_kernel<<<blocks_for(rows, 8), 256>>>(att, rows, T);
  FLOTILLA_CUDA_LAUNCHED("attention_forward(softmax)");
  run_gemm(handle, attention_values_gemm(B, T, NH, HS), v, att, y);
  unpermute_kernel<<<blocks_for(n, 256), 256>>>(out, y, B, T, NH, HS, false);
  FLOTILLA_CUDA_LAUNCHED("attention_forward(unpermute)");
  scratch_free(scratch);
}

void attention_backward(cublasContext* handle, float* dqkv, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const std::size_t n = static_cast<std::size_t>(B) * T * C;
  const std::size_t natt = static_cast<std::size_t>(B) * NH * T * T;
  float* scratch = static_cast<float*>(scratch_alloc((7 * n + natt) * sizeof(float)));
  float *q = scratch, *k = q + n, *v = k + n, *dy = v + n, *dq = dy + n, *dk = dq + n,
        *dv = dk + n, *datt = dv + n;
  permute_kernel<<<blocks_for(n, 256), 256>>>(q, k, v, qkv, B, T, NH, HS);
  FLOTILLA_CUDA_LAUNCHED("attention_backward(permute qkv)");
  unpermute_kernel<<<blocks_for(n, 256), 256>>>(dy, dout, B, T, NH, HS, true);
  FLOTILLA_CUDA_LAUNCHED("attention_backward(permute dout)");
  const float scale = 1.f / std::sqrt(static_cast<float>(HS));
  // datt = dy v^T ; dv = att^T dy
  run_gemm(handle, attention_datt_gemm(B, T, NH, HS), v, dy, datt);
  run_gemm(handle, attention_dv_gemm(B, T, NH, HS), dy, att, dv);
  const int rows = B * NH * T;
  softmax_backward_kernel<<<blocks_for(rows, 8), 256>>>(datt, att, rows, T, scale);
  FLOTILLA_CUDA_LAUNCHED("attention_backward(softmax)");
  // dq = dpre k ; dk = dpre^T q
  run_gemm(handle, attention_dq_gemm(B, T, NH, HS), k, datt, dq);
  run_gemm(handle, attention_dk_gemm(B, T, NH, HS), q, datt, dk);
  permute_backward_kernel<<<blocks_for(n, 256), 256>>>(dqkv, dq, dk, dv, B, T, NH, HS);
  FLOTILLA_CUDA_LAUNCHED("attention_backward(scatter)");
  scratch_free(scratch);
}

}  // namespace flotilla::worker::cuda
