// Softmax cross-entropy on the GPU: one block per row, block reductions in a fixed tree order.
#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float block_reduce(float v, float* shared, bool is_max) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = is_max ? warp_max(v) : warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < kThreads / 32 ? shared[lane] : (is_max ? -INFINITY : 0.f);
  r = is_max ? warp_max(r) : warp_sum(r);
  __syncthreads();
  return r;
}

__global__ void cross_entropy_forward_kernel(float* losses, float* probs, const float* logits,
                                             const std::int32_t* targets, int V) {
  __shared__ float shared[kThreads / 32];
  const int row = blockIdx.x;
  const float* l = logits + static_cast<std::size_t>(row) * V;
  float* p = probs + static_cast<std::size_t>(row) * V;
  float maxv = -INFINITY;
  for (int j = threadIdx.x; j < V; j += kThreads) maxv = fmaxf(maxv, l[j]);
  maxv = block_reduce(maxv, shared, true);
  float sum = 0.f;
  for (int j = threadIdx.x; j < V; j += kThreads) {
    const float e = expf(l[j] - maxv);
    p[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, shared, false);
  const float inv = 1.f / sum;
  for (int j = threadIdx.x; j < V; j += kThreads) p[j] *= inv;
  if (threadIdx.x == 0) losses[row] = logf(sum) - (l[targets[row]] - maxv);
}

__global__ void cross_entropy_backward_kernel(float* dlogits, const float* probs,
                                              const std::int32_t* targets, float dloss, int N,
                                              int V) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<std::size_t>(N) * V) return;
  const int j = static_cast<int>(idx % V);
  const int row = static_cast<int>(idx / V);
  dlogits[idx] += (probs[idx] - (j == targets[row] ? 1.f : 0.f)) * dloss;
}

}  // namespace

void cross_entropy_forward(float* losses, float* probs, const float* logits,
                           const std::int32_t* targets, int N, int V) {
  cross_entropy_forward_kernel<<<N, kThreads>>>(losses, probs, logits, targets, V);
  FLOTILLA_CUDA_LAUNCHED("cross_entropy_forward");
}

void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                            float dloss, int N, int V) {
  const std::size_t n = static_cast<std::size_t>(N) * V;
  cross_entropy_backward_kernel<<<blocks_for(n, 256), 256>>>(dlogits, probs, targets, dloss, N, V);
  FLOTILLA_CUDA_LAUNCHED("cross_entropy_backward");
}

}  // namespace flotilla::worker::cuda
