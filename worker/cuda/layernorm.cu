// LayerNorm on the GPU: one warp per row (fixed shuffle order), eps 1e-5 as on the CPU.
// Weight/bias grads: per-chunk column partials, then an in-order sum over chunks (no atomics).
#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

constexpr float kEps = 1e-5f;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* x = inp + static_cast<std::size_t>(row) * C;
  float sum = 0.f;
  for (int c = lane; c < C; c += 32) sum += x[c];
  const float m = warp_sum(sum) / C;
  float var = 0.f;
  for (int c = lane; c < C; c += 32) {
    const float d = x[c] - m;
    var += d * d;
  }
  const float s = rsqrtf(warp_sum(var) / C + kEps);
  float* o = out + static_cast<std::size_t>(row) * C;
  for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_backward_dx_kernel(float* dinp, const float* dout, const float* inp,
                                             const float* weight, const float* mean,
                                             const float* rstd, int N, int C) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* x = inp + static_cast<std::size_t>(row) * C;
  const float* d = dout + static_cast<std::size_t>(row) * C;
  float* dx = dinp + static_cast<std::size_t>(row) * C;
  const float m = mean[row], s = rstd[row];
  float a = 0.f, b = 0.f;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    const float dnorm = weight[c] * d[c];
    a += dnorm;
    b += dnorm * xhat;
  }
  a = warp_sum(a) / C;
  b = warp_sum(b) / C;
  for (int c = lane; c < C; c += 32) {
    const float xhat = (x[c] - m) * s;
    dx[c] += (weight[c] * d[c] - a - xhat * b) * s;
  }
}

// partial[chunk, c] = sum over the chunk's rows of dout*xhat (dw) and dout (db). Chunks stride
// by gridDim.y (at most kMaxGridY), so any N works; each chunk's sum is still in row order.
__global__ void layernorm_param_partials_kernel(float* pw, float* pb, const float* dout,
                                                const float* inp, const float* mean,
                                                const float* rstd, int N, int C, int chunks) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int begin = chunk * kColumnChunkRows;
    const int end = min(N, begin + kColumnChunkRows);
    float aw = 0.f, ab = 0.f;
    for (int n = begin; n < end; ++n) {
      const std::size_t i = static_cast<std::size_t>(n) * C + c;
      aw += dout[i] * (inp[i] - mean[n]) * rstd[n];
      ab += dout[i];
    }
    pw[static_cast<std::size_t>(chunk) * C + c] = aw;
    pb[static_cast<std::size_t>(chunk) * C + c] = ab;
  }
}

__global__ void column_sum_kernel(float* acc, const float* x, int rows, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float a = 0.f;
  for (int r = 0; r < rows; ++r) a += x[static_cast<std::size_t>(r) * C + c];
  acc[c] += a;
}

__global__ void column_partials_kernel(float* partial, const float* x, int N, int C, int chunks) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int begin = chunk * kColumnChunkRows;
    const int end = min(N, begin + kColumnChunkRows);
    float a = 0.f;
    for (int n = begin; n < end; ++n) a += x[static_cast<std::size_t>(n) * C + c];
    partial[static_cast<std::size_t>(chunk) * C + c] = a;
  }
}

// gridDim.y is limited to 65535: with one chunk of 128 rows per y block, more than 8.4 M rows
// (B*T, e.g. 8192 sequences of 1024 tokens) failed to launch.
unsigned chunk_grid_y(int chunks) {
  return static_cast<unsigned>(chunks < kMaxGridY ? chunks : kMaxGridY);
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  if (N <= 0) return;
  const int warps_per_block = 8;
  layernorm_forward_kernel<<<blocks_for(N, warps_per_block), 32 * warps_per_block>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  FLOTILLA_CUDA_LAUNCHED("layernorm_forward");
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
  const int warps_per_block = 8;
  if (N <= 0 || C <= 0) return;
  layernorm_backward_dx_kernel<<<blocks_for(N, warps_per_block), 32 * warps_per_block>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  FLOTILLA_CUDA_LAUNCHED("layernorm_backward(dx)");
  const int chunks = static_cast<int>(blocks_for(N, kColumnChunkRows));
  float* partial = static_cast<float*>(scratch_alloc(2 * sizeof(float) * chunks * C));
  float* pw = partial;
  float* pb = partial + static_cast<std::size_t>(chunks) * C;
  layernorm_param_partials_kernel<<<dim3(blocks_for(C, 128), chunk_grid_y(chunks)), 128>>>(
      pw, pb, dout, inp, mean, rstd, N, C, chunks);
  FLOTILLA_CUDA_LAUNCHED("layernorm_backward(partials)");
  column_sum_kernel<<<blocks_for(C, 128), 128>>>(dweight, pw, chunks, C);
  FLOTILLA_CUDA_LAUNCHED("layernorm_backward(weight sum)");
  column_sum_kernel<<<blocks_for(C, 128), 128>>>(dbias, pb, chunks, C);
  FLOTILLA_CUDA_LAUNCHED("layernorm_backward(bias sum)");
  scratch_free(partial);
}

void column_sum_accumulate(float* acc, const float* x, int N, int C) {
  if (N <= 0 || C <= 0) return;
  const int chunks = static_cast<int>(blocks_for(N, kColumnChunkRows));
  float* partial = static_cast<float*>(scratch_alloc(sizeof(float) * chunks * C));
  column_partials_kernel<<<dim3(blocks_for(C, 128), chunk_grid_y(chunks)), 128>>>(partial, x, N,
                                                                                  C, chunks);
  FLOTILLA_CUDA_LAUNCHED("column_sum_accumulate(partials)");
  column_sum_kernel<<<blocks_for(C, 128), 128>>>(acc, partial, chunks, C);
  FLOTILLA_CUDA_LAUNCHED("column_sum_accumulate(sum)");
  scratch_free(partial);
}

}  // namespace flotilla::worker::cuda
