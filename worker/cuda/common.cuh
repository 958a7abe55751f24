// Shared helpers for the CUDA kernels: error checks that throw one clear line, launch sizes,
// and deterministic warp/block reductions (fixed shuffle/tree order).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
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
// FLOTILLA_CUDA_SYNC=1: synchronize after every kernel launch, so a fault inside a kernel (an
// illegal address, say) is reported naming that kernel instead of the next cudaMemcpy.
inline bool sync_after_each_launch() {
  static const bool on = [] {
    const char* v = std::getenv("FLOTILLA_CUDA_SYNC");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}
inline void launched(const char* name) {
  check(cudaGetLastError(), name);
  if (sync_after_each_launch())
    check(cudaDeviceSynchronize(), (std::string(name) + " (FLOTILLA_CUDA_SYNC)").c_str());
}
#define FLOTILLA_CUDA_CHECK(expr) ::flotilla::worker::cuda::check((expr), #expr)
#define FLOTILLA_CUDA_LAUNCHED(name) ::flotilla::worker::cuda::launched(name)

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
