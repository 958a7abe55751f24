// AdamW and the grad sum of squares on the GPU. sum_squares is deterministic: a fixed grid of
// kBlocks x kThreads double accumulators, a fixed in-block tree, and an in-order host sum.
#include <cmath>
#include <vector>

#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

constexpr int kBlocks = 256;
constexpr int kThreads = 256;

__global__ void sum_squares_kernel(double* partial, const float* x, std::size_t n) {
  __shared__ double shared[kThreads];
  double acc = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(kBlocks) * kThreads)
    acc += static_cast<double>(x[i]) * x[i];
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v,
                             const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1,
                             float beta2, float eps, float weight_decay, float grad_scale,
                             float bias1, float bias2) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = grads[i] * grad_scale;
  const float mi = beta1 * m[i] + (1.f - beta1) * g;
  const float vi = beta2 * v[i] + (1.f - beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float wd = decay_mask[i] ? weight_decay : 0.f;
  params[i] -= lr * ((mi / bias1) / (sqrtf(vi / bias2) + eps) + wd * params[i]);
}

}  // namespace

double sum_squares(const float* x, std::size_t n) {
  if (n == 0) return 0.0;
  double* partial = static_cast<double*>(scratch_alloc(kBlocks * sizeof(double)));
  sum_squares_kernel<<<kBlocks, kThreads>>>(partial, x, n);
  FLOTILLA_CUDA_LAUNCHED("sum_squares");
  std::vector<double> host(kBlocks);
  FLOTILLA_CUDA_CHECK(cudaMemcpy(host.data(), partial, kBlocks * sizeof(double),
                                 cudaMemcpyDeviceToHost));
  scratch_free(partial);
  double total = 0.0;
  for (double p : host) total += p;
  return total;
}

void adamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decay_mask,
           std::size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
           float grad_scale, std::int64_t t) {
  if (n == 0) return;
  // Same bias corrections as the CPU reference (computed in double, rounded to float).
  const float bias1 = 1.0f - static_cast<float>(std::pow(static_cast<double>(beta1), t));
  const float bias2 = 1.0f - static_cast<float>(std::pow(static_cast<double>(beta2), t));
  adamw_kernel<<<blocks_for(n, 256), 256>>>(params, grads, m, v, decay_mask, n, lr, beta1, beta2,
                                            eps, weight_decay, grad_scale, bias1, bias2);
  FLOTILLA_CUDA_LAUNCHED("adamw");
}

}  // namespace flotilla::worker::cuda
