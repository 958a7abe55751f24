#include "planner/runtime_overhead.h"

namespace flotilla::planner {

std::int64_t nccl_collective_communicator_bytes(const GpuType& gpu, bool spans_nodes) {
  const std::int64_t per_connection =
      kNcclSimpleBufferBytes + kNcclLlBufferBytes + (gpu.nccl_ll128 ? kNcclLl128BufferBytes : 0);
  const int channels = spans_nodes ? kNcclNetChannels : gpu.nccl_channels;
  return static_cast<std::int64_t>(channels) * kNcclConnectionsPerChannel * per_connection;
}

RuntimeOverhead runtime_overhead(const GpuType& gpu, const RankCommunicators& comms) {
  RuntimeOverhead out;
  out.cuda_context_bytes = gpu.cuda_context_bytes;
  if (gpu.emulated) return out;  // the reference worker: no CUDA libraries, no NCCL
  out.cublas_workspace_bytes = gpu.cublas_workspace_bytes;
  if (comms.tp > 1) out.nccl_bytes += nccl_collective_communicator_bytes(gpu, comms.tp_spans_nodes);
  if (comms.dp > 1) out.nccl_bytes += nccl_collective_communicator_bytes(gpu, comms.dp_spans_nodes);
  out.nccl_bytes +=
      static_cast<std::int64_t>(comms.pipeline_neighbours) * 2 * kNcclP2pChannelsPerPeer * kNcclSimpleBufferBytes;
  return out;
}

RankCommunicators stage_communicators(int first_block, int last_block, int num_blocks, int tp, int dp,
                                      int gpus_per_node) {
  RankCommunicators c;
  c.tp = tp;
  c.dp = dp;
  c.tp_spans_nodes = tp > gpus_per_node;
  c.dp_spans_nodes = static_cast<long long>(tp) * dp > gpus_per_node;
  c.pipeline_neighbours = (first_block > 0 ? 1 : 0) + (last_block < num_blocks ? 1 : 0);
  return c;
}

}  // namespace flotilla::planner
