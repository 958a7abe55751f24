// Element-wise ops on the GPU: GELU (tanh approximation), residual add and its backward, and
// dst += src. One thread per element; no reductions, so trivially deterministic.
#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void gelu_forward_kernel(float* out, const float* inp, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  out[i] = 0.5f * x * (1.f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout,
                                     std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  const float sech2 = 1.f - th * th;
  const float grad = 0.5f * (1.f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
  dinp[i] += grad * dout[i];
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float* da, float* db, const float* dout, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  da[i] += dout[i];
  db[i] += dout[i];
}

__global__ void accumulate_kernel(float* dst, const float* src, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<blocks_for(n, 256), 256>>>(out, inp, n);
  FLOTILLA_CUDA_LAUNCHED("gelu_forward");
}
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n, 256), 256>>>(dinp, inp, dout, n);
  FLOTILLA_CUDA_LAUNCHED("gelu_backward");
}
void residual_forward(float* out, const float* a, const float* b, std::size_t n) {
  if (n == 0) return;
  residual_forward_kernel<<<blocks_for(n, 256), 256>>>(out, a, b, n);
  FLOTILLA_CUDA_LAUNCHED("residual_forward");
}
void residual_backward(float* da, float* db, const float* dout, std::size_t n) {
  if (n == 0) return;
  residual_backward_kernel<<<blocks_for(n, 256), 256>>>(da, db, dout, n);
  FLOTILLA_CUDA_LAUNCHED("residual_backward");
}
void accumulate(float* dst, const float* src, std::size_t n) {
  if (n == 0) return;
  accumulate_kernel<<<blocks_for(n, 256), 256>>>(dst, src, n);
  FLOTILLA_CUDA_LAUNCHED("accumulate");
}

}  // namespace flotilla::worker::cuda
