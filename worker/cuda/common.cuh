// Shared helpers for the CUDA kernels: error checks that throw one clear line, launch sizes,
// and deterministic warp/block reductions (fixed shuffle/tree order).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace flotilla::worker::cuda {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
}
inline void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what + ": status " +
                             std::to_string(static_cast<int>(st)));
}
#define FLOTILLA_CUDA_CHECK(expr) ::flotilla::worker::cuda::check((expr), #expr)
#define FLOTILLA_CUDA_LAUNCHED(name) ::flotilla::worker::cuda::check(cudaGetLastError(), name)

inline unsigned blocks_for(std::size_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

template <class T>
__device__ inline T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Rows per chunk for the deterministic column sums.
inline constexpr int kColumnChunkRows = 128;
// The hardware limit on gridDim.y and gridDim.z (gridDim.x allows 2^31 - 1).
inline constexpr int kMaxGridY = 65535;

}  // namespace flotilla::worker::cuda
