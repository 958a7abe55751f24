// Per-process GPU memory outside the model's tensors: CUDA context, NCCL buffers, cuBLAS workspace.
//
// Guarantees: runtime_overhead() is closed form (O(1)) and splits the bytes a training process
//   holds beyond its tensors into named terms, by GPU type and by the communicators the rank
//   joins (docs/planner.md, "Runtime overheads"):
//   - cuda_context_bytes: the GPU type's GpuType::cuda_context_bytes (context + loaded kernel
//     modules; depends on architecture, driver and CUDA's module loading, so it is a catalog
//     field: fitted on GH200 runs, a documented default elsewhere).
//   - nccl_bytes: per collective communicator (TP group when tp > 1, DP group when dp > 1) every
//     channel holds kNcclConnectionsPerChannel receive connections, each with one buffer per
//     protocol: Simple NCCL_BUFFSIZE (4 MiB), LL (512 KiB) and, where NCCL enables it (NVLink
//     GPUs, GpuType::nccl_ll128), LL128 (4.6875 MiB). A group inside one node runs
//     GpuType::nccl_channels channels; a group across nodes runs kNcclNetChannels (NCCL opens
//     channels per NIC, and Megatron's rank order puts one or few ranks of a DP group per node).
//     Per pipeline neighbour a send and a receive connection on kNcclP2pChannelsPerPeer
//     channels with the Simple buffer.
//   - cublas_workspace_bytes: GpuType::cublas_workspace_bytes (PyTorch's default
//     CUBLAS_WORKSPACE_CONFIG, :4096:2:16:8 = 8.125 MiB before Hopper, 32 MiB on Hopper).
// Assumes: NCCL defaults (no NCCL_BUFFSIZE / NCCL_*_NCHANNELS set); channel counts per type
//   are GpuType::nccl_channels (what NCCL's topology search picks is not known here).
// Caveats: an emulated type (GpuType::emulated) has none of these (the reference worker runs
//   on the CPU and uses no NCCL): only its catalog cuda_context_bytes counts. The allocator's
//   fragmentation is not here but in the memory model (MemoryModelConstants::allocator_fraction).
#pragma once

#include <cstdint>

#include "planner/gpu_catalog.h"

namespace flotilla::planner {

inline constexpr std::int64_t kNcclSimpleBufferBytes = 4LL << 20;  // NCCL_BUFFSIZE default
inline constexpr std::int64_t kNcclLlBufferBytes = 512LL << 10;    // LL: 8 lines x 512 threads x 8 steps x 16 B
inline constexpr std::int64_t kNcclLl128BufferBytes = 4915200;     // LL128: 120 x 640 threads x 8 steps x 8 B
inline constexpr int kNcclConnectionsPerChannel = 2;               // ring receive + tree (assumption)
inline constexpr int kNcclP2pChannelsPerPeer = 2;                  // NCCL_NCHANNELS_PER_NET_PEER default
inline constexpr int kNcclNetChannels = 2;                         // channels of a group across nodes (assumption)

// The NCCL groups one rank joins that carry traffic during training.
struct RankCommunicators {
  int tp = 1;                   // TP group size (all-reduce per layer when > 1)
  int dp = 1;                   // DP group size (gradient all-reduce when > 1)
  bool tp_spans_nodes = false;  // the TP group crosses nodes
  bool dp_spans_nodes = false;  // the DP group crosses nodes
  int pipeline_neighbours = 0;  // 0, 1 or 2 adjacent stages (p2p send and receive)
};

struct RuntimeOverhead {
  std::int64_t cuda_context_bytes = 0;
  std::int64_t nccl_bytes = 0;
  std::int64_t cublas_workspace_bytes = 0;
  std::int64_t total_bytes() const { return cuda_context_bytes + nccl_bytes + cublas_workspace_bytes; }
};

// Bytes of one NCCL collective communicator on this GPU type (all channels, all protocols).
std::int64_t nccl_collective_communicator_bytes(const GpuType& gpu, bool spans_nodes);

RuntimeOverhead runtime_overhead(const GpuType& gpu, const RankCommunicators& comms);

// The communicators of a rank of the stage holding blocks [first_block, last_block) of a model
// with num_blocks blocks, at TP tp and DP dp, on nodes of gpus_per_node GPUs (Megatron's rank
// order: TP innermost, then DP, so the DP group leaves the node once tp * dp exceeds it).
RankCommunicators stage_communicators(int first_block, int last_block, int num_blocks, int tp, int dp,
                                      int gpus_per_node);

}  // namespace flotilla::planner
