// Token + position embedding on the GPU. Backward is deterministic without atomics: wpe rows
// sum over the batch in order; wte rows are grouped per token id on the host (ids are few and
// already host-visible) and each group is summed in position order.
#include <vector>

#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"
#include "worker/cuda/token_groups.h"

namespace flotilla::worker::cuda {
namespace {

__global__ void embedding_forward_kernel(float* out, const std::int32_t* tokens, const float* wte,
                                         const float* wpe, int B, int T, int C) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t total = static_cast<std::size_t>(B) * T * C;
  if (idx >= total) return;
  const int c = static_cast<int>(idx % C);
  const std::size_t bt = idx / C;
  const int t = static_cast<int>(bt % T);
  out[idx] = wte[static_cast<std::size_t>(tokens[bt]) * C + c] + wpe[static_cast<std::size_t>(t) * C + c];
}

__global__ void wpe_backward_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<std::size_t>(T) * C) return;
  float acc = dwpe[idx];
  for (int b = 0; b < B; ++b) acc += dout[static_cast<std::size_t>(b) * T * C + idx];
  dwpe[idx] = acc;
}

// One block per distinct token id; threads stride over C; positions summed in ascending order.
__global__ void wte_backward_kernel(float* dwte, const float* dout, const int* ids,
                                    const int* offsets, const int* positions, int C) {
  const int group = blockIdx.x;
  const int id = ids[group];
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = dwte[static_cast<std::size_t>(id) * C + c];
    for (int k = offsets[group]; k < offsets[group + 1]; ++k)
      acc += dout[static_cast<std::size_t>(positions[k]) * C + c];
    dwte[static_cast<std::size_t>(id) * C + c] = acc;
  }
}

}  // namespace

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C) {
  const std::size_t n = static_cast<std::size_t>(B) * T * C;
  embedding_forward_kernel<<<blocks_for(n, 256), 256>>>(out, tokens, wte, wpe, B, T, C);
  FLOTILLA_CUDA_LAUNCHED("embedding_forward");
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int T, int C, int V) {
  const std::size_t tc = static_cast<std::size_t>(T) * C;
  wpe_backward_kernel<<<blocks_for(tc, 256), 256>>>(dwpe, dout, B, T, C);
  FLOTILLA_CUDA_LAUNCHED("embedding_backward(wpe)");
  // Counting sort of positions by token id (stable, so positions stay ascending).
  const int N = B * T;
  std::vector<std::int32_t> host_tokens(N);
  FLOTILLA_CUDA_CHECK(cudaMemcpy(host_tokens.data(), tokens, N * sizeof(std::int32_t),
                                 cudaMemcpyDeviceToHost));
  const TokenGroups grouped = group_positions_by_token(host_tokens, V);
  const std::vector<int>& ids = grouped.ids;
  const std::vector<int>& offsets = grouped.offsets;
  const std::vector<int>& positions = grouped.positions;
  const int groups = static_cast<int>(ids.size());
  const std::size_t bytes = (ids.size() + offsets.size() + positions.size()) * sizeof(int);
  int* dev = static_cast<int*>(scratch_alloc(bytes));
  int* d_ids = dev;
  int* d_offsets = d_ids + ids.size();
  int* d_positions = d_offsets + offsets.size();
  FLOTILLA_CUDA_CHECK(cudaMemcpy(d_ids, ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice));
  FLOTILLA_CUDA_CHECK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * sizeof(int),
                                 cudaMemcpyHostToDevice));
  FLOTILLA_CUDA_CHECK(cudaMemcpy(d_positions, positions.data(), positions.size() * sizeof(int),
                                 cudaMemcpyHostToDevice));
  if (groups > 0) {
    wte_backward_kernel<<<groups, 256>>>(dwte, dout, d_ids, d_offsets, d_positions, C);
    FLOTILLA_CUDA_LAUNCHED("embedding_backward(wte)");
  }
  scratch_free(dev);
}

}  // namespace flotilla::worker::cuda
