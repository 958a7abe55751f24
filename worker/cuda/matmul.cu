// Dense layer on the GPU with cuBLAS. Row-major X[rows, cols] is column-major X^T, so
//   out[N,OUT] = inp[N,IN] @ W[IN,OUT]       is  out^T = W^T inp^T      : gemm(N, N, OUT, N, IN)
//   dinp[N,IN] += dout[N,OUT] @ W^T          is  dinp^T += W dout^T     : gemm(T, N, IN, N, OUT)
//   dW[IN,OUT] += inp^T @ dout               is  dW^T += dout^T inp     : gemm(N, T, OUT, IN, N)
// The bias is written first and the forward GEMM adds onto it (beta = 1); the bias grad is a
// deterministic chunked column sum.
#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

__global__ void broadcast_rows_kernel(float* out, const float* bias, int N, int OUT) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<std::size_t>(N) * OUT) return;
  out[idx] = bias[idx % OUT];
}

}  // namespace

void matmul_forward(cublasContext* handle, float* out, const float* inp, const float* weight,
                    const float* bias, int N, int IN, int OUT) {
  const float one = 1.f, zero = 0.f;
  if (bias) {
    const std::size_t n = static_cast<std::size_t>(N) * OUT;
    broadcast_rows_kernel<<<blocks_for(n, 256), 256>>>(out, bias, N, OUT);
    FLOTILLA_CUDA_LAUNCHED("matmul_forward(bias)");
  }
  FLOTILLA_CUDA_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, OUT, N, IN, &one, weight, OUT,
                                  inp, IN, bias ? &one : &zero, out, OUT));
}

void matmul_backward(cublasContext* handle, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, int N, int IN,
                     int OUT) {
  const float one = 1.f;
  if (dinp)
    FLOTILLA_CUDA_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, IN, N, OUT, &one, weight,
                                    OUT, dout, OUT, &one, dinp, IN));
  FLOTILLA_CUDA_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, OUT, IN, N, &one, dout, OUT,
                                  inp, IN, &one, dweight, OUT));
  if (dbias) column_sum_accumulate(dbias, dout, N, OUT);
}

}  // namespace flotilla::worker::cuda
