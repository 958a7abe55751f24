// Dense layer on the GPU with cuBLAS; the GEMM arguments are the plans in gemm_plan.h
// (checked on the CPU by GemmPlan tests). Row-major X[rows, cols] is column-major X^T, so
//   out[N,OUT] = inp[N,IN] @ W[IN,OUT]       is  out^T = W^T inp^T      : gemm(N, N, OUT, N, IN)
//   dinp[N,IN] += dout[N,OUT] @ W^T          is  dinp^T += W dout^T     : gemm(T, N, IN, N, OUT)
//   dW[IN,OUT] += inp^T @ dout               is  dW^T += dout^T inp     : gemm(N, T, OUT, IN, N)
// The bias is written first and the forward GEMM adds onto it (beta = 1); the bias grad is a
// deterministic chunked column sum.
#include "worker/cuda/common.cuh"
#include "worker/cuda/gemm_plan.h"
#include "worker/cuda/kernels.h"

namespace flotilla::worker::cuda {
namespace {

__global__ void broadcast_rows_kernel(float* out, const float* bias, int N, int OUT) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<std::size_t>(N) * OUT) return;
  out[idx] = bias[idx % OUT];
}

}  // namespace

void run_gemm(cublasContext* handle, const GemmCall& g, const float* A, const float* B, float* C) {
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.batch == 1)
    FLOTILLA_CUDA_CHECK(cublasSgemm(handle, ta, tb, g.m, g.n, g.k, &g.alpha, A, g.lda, B, g.ldb,
                                    &g.beta, C, g.ldc));
  else
    FLOTILLA_CUDA_CHECK(cublasSgemmStridedBatched(handle, ta, tb, g.m, g.n, g.k, &g.alpha, A,
                                                  g.lda, g.stride_a, B, g.ldb, g.stride_b,
                                                  &g.beta, C, g.ldc, g.stride_c, g.batch));
}

void matmul_forward(cublasContext* handle, float* out, const float* inp, const float* weight,
                    const float* bias, int N, int IN, int OUT) {
  if (bias) {
    const std::size_t n = static_cast<std::size_t>(N) * OUT;
    broadcast_rows_kernel<<<blocks_for(n, 256), 256>>>(out, bias, N, OUT);
    FLOTILLA_CUDA_LAUNCHED("matmul_forward(bias)");
  }
  run_gemm(handle, matmul_forward_gemm(N, IN, OUT, bias != nullptr), weight, inp, out);
}

void matmul_backward(cublasContext* handle, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, int N, int IN,
                     int OUT) {
  if (dinp) run_gemm(handle, matmul_dinp_gemm(N, IN, OUT), weight, dout, dinp);
  run_gemm(handle, matmul_dweight_gemm(N, IN, OUT), dout, inp, dweight);
  if (dbias) column_sum_accumulate(dbias, dout, N, OUT);
}

}  // namespace flotilla::worker::cuda
