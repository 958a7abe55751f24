// GPU-to-GPU tensor exchange between the ranks of one job over NCCL (the CUDA backend's
// alternative to moving activations, activation gradients and shard gradients through host
// memory and TCP).
//
// Guarantees:
//   - connect(): rank 0 creates one ncclUniqueId per channel and sends them to every rank over
//     the job's TcpTransport (the rendezvous it already has), then every rank joins
//     non-blocking NCCL communicators on its current CUDA device. NCCL_ALGO=Ring and
//     NCCL_PROTO=Simple are set (overriding the environment) before any communicator exists.
//   - Three channels, each its own communicator and CUDA stream: kForward (activations, stage
//     s -> s+1), kBackward (activation gradients, s+1 -> s) and kDataParallel (the shard-grad
//     chain). Within a channel every rank's traffic flows one way along a line, so NCCL's
//     "a send completes when the peer posts its receive" plus per-stream ordering cannot form
//     a cycle; the 1F1B pattern "both neighbours send, then receive" crosses two channels.
//   - send*() only enqueues (ncclSend inside ncclGroupStart/End) and returns; the staging
//     buffer of a host send is kept until the transfer completes. recv*() returns when the
//     data has arrived. Every wait is bounded by `timeout` (the transport's receive timeout):
//     on expiry all communicators are aborted and the error names the peer, the channel and
//     what was awaited. An asynchronous NCCL error (a peer died) is reported the same way.
//   - Moves bytes exactly: a tensor received over NCCL is bit-identical to the one sent. No
//     NCCL reduction is used; the data-parallel sum stays the trainer's fixed left fold over
//     virtual shards (added on the device with Backend::accumulate), so results do not depend
//     on NCCL's algorithm, protocol or the DP degree.
// Assumes: one GPU per rank (NCCL refuses two ranks of one communicator on one device); the
//   caller selected that device before any CUDA call; one thread drives the communicator.
// Caveats: host-vector sends and receives stage through a device buffer (the Stage API
//   exchanges host vectors). Compiled only when CMake finds NCCL next to CUDA
//   (FLOTILLA_HAVE_NCCL); otherwise connect() throws a one-line error and nccl_compiled() is
//   false. libnccl.so.2 is dlopen'ed by the first connect() (a missing library is a one-line
//   error then, not a start-up failure of every rank). Never executed in this repository's CI
//   (no GPU there).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace flotilla::worker {

class TcpTransport;

bool nccl_compiled();
// "major.minor.patch" of the libnccl this process loads (dlopen, no GPU needed); throws a
// one-line error when it cannot be loaded or NCCL was not compiled in.
std::string nccl_library_version();

class NcclCommunicator {
 public:
  enum Channel { kForward = 0, kBackward = 1, kDataParallel = 2 };
  static constexpr int kChannels = 3;

  // Collective over all ranks of `net`; `id_tag` is the transport tag used for the ids.
  static std::unique_ptr<NcclCommunicator> connect(TcpTransport& net, std::uint32_t id_tag,
                                                   std::chrono::milliseconds timeout);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // `count` float32 values. Host variants stage through a device buffer.
  void send_host(Channel channel, int peer, const float* host, std::size_t count);
  void recv_host(Channel channel, int peer, float* host, std::size_t count,
                 const std::string& what);
  // Device variants: `device` must stay valid and unmodified until wait_sends() returns.
  void send_device(Channel channel, int peer, const float* device, std::size_t count);
  void recv_device(Channel channel, int peer, float* device, std::size_t count,
                   const std::string& what);
  // Waits until every enqueued send has been received by its peer.
  void wait_sends();
  // Allocates `buffers` staging buffers of `count` floats now, while nothing is in flight.
  // take_staging() otherwise calls cudaMalloc in the middle of the pipeline, and cudaMalloc may
  // synchronize the device: a rank waiting there for its pending send to be received, while
  // its peer waits the same way for it, would deadlock before either posts its receive.
  void reserve_staging(std::size_t count, int buffers);

 private:
  NcclCommunicator();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::worker
