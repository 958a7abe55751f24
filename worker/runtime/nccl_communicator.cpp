#include "worker/runtime/nccl_communicator.h"

#include <stdexcept>

#include "worker/runtime/tcp_transport.h"

#if defined(FLOTILLA_HAVE_NCCL)
#ifndef FLOTILLA_NCCL_LIBRARY_PATH
#define FLOTILLA_NCCL_LIBRARY_PATH "libnccl.so"
#endif
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <type_traits>
#include <vector>
#endif

namespace flotilla::worker {

#if !defined(FLOTILLA_HAVE_NCCL)

bool nccl_compiled() { return false; }
std::string nccl_library_version() {
  throw std::runtime_error("this flotilla-worker was built without NCCL");
}

struct NcclCommunicator::Impl {};
NcclCommunicator::NcclCommunicator() = default;
NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<NcclCommunicator> NcclCommunicator::connect(TcpTransport&, std::uint32_t,
                                                            std::chrono::milliseconds) {
  throw std::runtime_error(
      "--comm nccl: this flotilla-worker was built without NCCL (CMake found no nccl.h / "
      "libnccl next to CUDA); use --comm tcp");
}
void NcclCommunicator::send_host(Channel, int, const float*, std::size_t) {}
void NcclCommunicator::recv_host(Channel, int, float*, std::size_t, const std::string&) {}
void NcclCommunicator::send_device(Channel, int, const float*, std::size_t) {}
void NcclCommunicator::recv_device(Channel, int, float*, std::size_t, const std::string&) {}
void NcclCommunicator::wait_sends() {}
void NcclCommunicator::reserve_staging(std::size_t, int) {}

#else

namespace {

using Clock = std::chrono::steady_clock;

// libnccl is opened on first use, not linked: a build with NCCL still starts CPU and
// --comm tcp jobs on hosts without libnccl, and those ranks never map its 200+ MB.
struct NcclApi {
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGetVersion) GetVersion = nullptr;
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    void* lib = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = ::dlopen(FLOTILLA_NCCL_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      throw std::runtime_error(std::string("--comm nccl: cannot load libnccl.so.2 (") +
                               ::dlerror() + "); install NCCL or use --comm tcp");
    NcclApi a;
    auto load = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
      if (fn == nullptr)
        throw std::runtime_error(std::string("--comm nccl: libnccl has no ") + name +
                                 " (NCCL too old? 2.14 or newer is needed); use --comm tcp");
    };
    load(a.GetUniqueId, "ncclGetUniqueId");
    load(a.CommInitRankConfig, "ncclCommInitRankConfig");
    load(a.CommGetAsyncError, "ncclCommGetAsyncError");
    load(a.CommFinalize, "ncclCommFinalize");
    load(a.CommDestroy, "ncclCommDestroy");
    load(a.CommAbort, "ncclCommAbort");
    load(a.GetErrorString, "ncclGetErrorString");
    load(a.GroupStart, "ncclGroupStart");
    load(a.GroupEnd, "ncclGroupEnd");
    load(a.Send, "ncclSend");
    load(a.Recv, "ncclRecv");
    load(a.GetVersion, "ncclGetVersion");
    return a;
  }();
  return api;
}


const char* channel_name(int channel) {
  switch (channel) {
    case NcclCommunicator::kForward: return "the activation channel";
    case NcclCommunicator::kBackward: return "the gradient channel";
    default: return "the data-parallel channel";
  }
}

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw std::runtime_error("NCCL path: " + what + " failed: " + cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw std::runtime_error("NCCL path: " + what + " failed: " + nccl().GetErrorString(r));
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

bool nccl_compiled() { return true; }

std::string nccl_library_version() {
  int code = 0;
  check_nccl(nccl().GetVersion(&code), "ncclGetVersion");
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

struct NcclCommunicator::Impl {
  int rank = 0;
  int world = 1;
  std::chrono::milliseconds timeout{300000};
  ncclComm_t comms[kChannels] = {};
  cudaStream_t streams[kChannels] = {};
  struct PendingSend {
    cudaEvent_t done = nullptr;
    void* staging = nullptr;  // owned staging buffer, or nullptr for device sends
    std::size_t bytes = 0;
    int channel = 0;
    int peer = 0;
  };
  std::vector<PendingSend> pending;
  std::vector<std::pair<void*, std::size_t>> free_staging;
  // Recorded on the legacy default stream (where the CUDA backend runs every kernel and copy)
  // and waited on by a channel's stream before each transfer; see after_backend_work().
  cudaEvent_t backend_done = nullptr;

  ~Impl() {
    // Destroyed by an error: abort (does not wait for peers that may be gone).
    const bool failing = std::uncaught_exceptions() > 0;
    for (auto& p : pending) {
      if (p.done) cudaEventDestroy(p.done);
      if (p.staging && !failing) cudaFree(p.staging);
    }
    for (auto& [ptr, bytes] : free_staging) cudaFree(ptr);
    for (int c = 0; c < kChannels; ++c) {
      if (comms[c] == nullptr) continue;
      if (failing) {
        nccl().CommAbort(comms[c]);
        continue;
      }
      // Clean shutdown of a non-blocking communicator: finalize, wait (bounded), destroy.
      ncclResult_t state = nccl().CommFinalize(comms[c]);
      const auto deadline = Clock::now() + timeout;
      while (state == ncclInProgress && Clock::now() < deadline) {
        std::this_thread::yield();
        nccl().CommGetAsyncError(comms[c], &state);
      }
      if (state == ncclSuccess) nccl().CommDestroy(comms[c]);
      else nccl().CommAbort(comms[c]);
    }
    for (auto s : streams)
      if (s) cudaStreamDestroy(s);
    if (backend_done) cudaEventDestroy(backend_done);
  }

  // The channel streams are non-blocking, so they do NOT wait for the legacy default stream on
  // which the backend queues its kernels, memsets and copies. Without this, a send could read
  // a buffer the backend is still writing and a receive could land before the backend's
  // zeroing memset of the same buffer (which would then wipe it).
  void after_backend_work(int channel) {
    if (backend_done == nullptr)
      check_cuda(cudaEventCreateWithFlags(&backend_done, cudaEventDisableTiming),
                 "cudaEventCreate (default-stream marker)");
    check_cuda(cudaEventRecord(backend_done, cudaStreamLegacy),
               "cudaEventRecord on the default stream");
    check_cuda(cudaStreamWaitEvent(streams[channel], backend_done, 0),
               "cudaStreamWaitEvent (channel stream after the default stream)");
  }

  void abort_all() {
    for (auto& comm : comms) {
      if (comm == nullptr) continue;
      nccl().CommAbort(comm);
      comm = nullptr;
    }
  }

  [[noreturn]] void timed_out(const std::string& what) {
    abort_all();
    throw std::runtime_error("timed out after " + seconds_text(timeout) + " " + what +
                             " over NCCL: that rank is hung, stopped or unreachable (raise "
                             "--recv-timeout / FLOTILLA_RECV_TIMEOUT_S if a step legitimately "
                             "takes longer)");
  }

  // ncclSuccess, or ncclInProgress while a non-blocking call is still running; any other
  // state (a peer died, a network error) aborts every communicator and throws.
  ncclResult_t async_state(int channel, const std::string& what) {
    ncclResult_t state = ncclSuccess;
    check_nccl(nccl().CommGetAsyncError(comms[channel], &state), "ncclCommGetAsyncError");
    if (state == ncclSuccess || state == ncclInProgress) return state;
    abort_all();
    throw std::runtime_error("NCCL error on " + std::string(channel_name(channel)) + " " + what +
                             ": " + nccl().GetErrorString(state) +
                             " (a peer rank probably died)");
  }

  void wait_ready(int channel, Clock::time_point deadline, const std::string& what) {
    while (async_state(channel, what) != ncclSuccess) {
      if (Clock::now() > deadline) timed_out(what);
      std::this_thread::yield();
    }
  }

  // Waits until `event` (or the whole stream when null) has completed.
  void wait_done(int channel, cudaEvent_t event, Clock::time_point deadline,
                 const std::string& what) {
    while (true) {
      cudaError_t e = event ? cudaEventQuery(event) : cudaStreamQuery(streams[channel]);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check_cuda(e, what);
      async_state(channel, what);
      if (Clock::now() > deadline) timed_out(what);
      std::this_thread::yield();
    }
  }

  void* take_staging(std::size_t bytes) {
    for (std::size_t i = 0; i < free_staging.size(); ++i) {
      if (free_staging[i].second < bytes) continue;
      void* p = free_staging[i].first;
      free_staging.erase(free_staging.begin() + static_cast<std::ptrdiff_t>(i));
      return p;
    }
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc of a staging buffer");
    return p;
  }

  // Recycles the staging buffers of sends that have completed.
  void reclaim() {
    for (std::size_t i = 0; i < pending.size();) {
      const cudaError_t e = cudaEventQuery(pending[i].done);
      if (e == cudaErrorNotReady) {
        ++i;
        continue;
      }
      check_cuda(e, "cudaEventQuery of a send to rank " + std::to_string(pending[i].peer));
      cudaEventDestroy(pending[i].done);
      if (pending[i].staging) free_staging.emplace_back(pending[i].staging, pending[i].bytes);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  void enqueue_send(int channel, int peer, const void* device, std::size_t count, void* staging) {
    const std::string what = "sending to rank " + std::to_string(peer);
    after_backend_work(channel);
    check_nccl(nccl().GroupStart(), "ncclGroupStart");
    check_nccl(nccl().Send(device, count, ncclFloat, peer, comms[channel], streams[channel]),
               "ncclSend to rank " + std::to_string(peer));
    check_nccl(nccl().GroupEnd(), "ncclGroupEnd");
    wait_ready(channel, Clock::now() + timeout, what);
    PendingSend p;
    check_cuda(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(p.done, streams[channel]), "cudaEventRecord");
    p.staging = staging;
    p.bytes = count * sizeof(float);
    p.channel = channel;
    p.peer = peer;
    pending.push_back(p);
  }

  void receive(int channel, int peer, void* device, std::size_t count, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    const std::string waiting = "waiting for rank " + std::to_string(peer) + " to send " + what;
    after_backend_work(channel);
    check_nccl(nccl().GroupStart(), "ncclGroupStart");
    check_nccl(nccl().Recv(device, count, ncclFloat, peer, comms[channel], streams[channel]),
               "ncclRecv from rank " + std::to_string(peer));
    check_nccl(nccl().GroupEnd(), "ncclGroupEnd");
    wait_ready(channel, deadline, waiting);
    wait_done(channel, nullptr, deadline, waiting);
  }
};

NcclCommunicator::NcclCommunicator() : impl_(std::make_unique<Impl>()) {}
NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<NcclCommunicator> NcclCommunicator::connect(TcpTransport& net,
                                                            std::uint32_t id_tag,
                                                            std::chrono::milliseconds timeout) {
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator());
  Impl& m = *c->impl_;
  m.rank = net.rank();
  m.world = net.world_size();
  m.timeout = timeout;
  // Pinned so that any NCCL collective is reproducible for a given communicator size; the
  // trainer itself only uses point-to-point transfers, which move bytes exactly.
  ::setenv("NCCL_ALGO", "Ring", 1);
  ::setenv("NCCL_PROTO", "Simple", 1);
  ncclUniqueId ids[kChannels];
  if (m.rank == 0) {
    for (auto& id : ids) check_nccl(nccl().GetUniqueId(&id), "ncclGetUniqueId");
    for (int r = 1; r < m.world; ++r) net.send(r, id_tag, ids, sizeof ids);
    net.flush();
  } else {
    net.recv(0, id_tag, ids, sizeof ids);
  }
  const auto deadline = Clock::now() + timeout;
  for (int ch = 0; ch < kChannels; ++ch) {
    check_cuda(cudaStreamCreateWithFlags(&m.streams[ch], cudaStreamNonBlocking),
               "cudaStreamCreate");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check_nccl(nccl().CommInitRankConfig(&m.comms[ch], m.world, ids[ch], m.rank, &config),
               "ncclCommInitRankConfig (one GPU per rank? check CUDA_VISIBLE_DEVICES)");
    m.wait_ready(ch, deadline, std::string("joining ") + channel_name(ch));
  }
  return c;
}

void NcclCommunicator::send_host(Channel channel, int peer, const float* host,
                                 std::size_t count) {
  impl_->reclaim();
  const std::size_t bytes = count * sizeof(float);
  void* staging = impl_->take_staging(bytes);
  // On the channel's own stream, so ncclSend is ordered after it. A plain cudaMemcpy here was
  // a race: from pageable memory it may return before its DMA has landed, and it runs on the
  // legacy stream, which the non-blocking channel stream does not wait for. cudaMemcpyAsync
  // from pageable memory has copied `host` out before it returns, so the caller may free it.
  check_cuda(cudaMemcpyAsync(staging, host, bytes, cudaMemcpyHostToDevice,
                             impl_->streams[channel]),
             "staging a send (cudaMemcpyAsync host to device)");
  impl_->enqueue_send(channel, peer, staging, count, staging);
}

void NcclCommunicator::recv_host(Channel channel, int peer, float* host, std::size_t count,
                                 const std::string& what) {
  impl_->reclaim();
  const std::size_t bytes = count * sizeof(float);
  void* staging = impl_->take_staging(bytes);
  impl_->receive(channel, peer, staging, count, what);
  check_cuda(cudaMemcpy(host, staging, bytes, cudaMemcpyDeviceToHost),
             "unstaging a receive (cudaMemcpy device to host)");
  impl_->free_staging.emplace_back(staging, bytes);
}

void NcclCommunicator::send_device(Channel channel, int peer, const float* device,
                                   std::size_t count) {
  impl_->enqueue_send(channel, peer, device, count, nullptr);
}

void NcclCommunicator::recv_device(Channel channel, int peer, float* device, std::size_t count,
                                   const std::string& what) {
  impl_->receive(channel, peer, device, count, what);
}

void NcclCommunicator::reserve_staging(std::size_t count, int buffers) {
  const std::size_t bytes = count * sizeof(float);
  for (int i = 0; i < buffers; ++i) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc of a staging buffer (reserve)");
    impl_->free_staging.emplace_back(p, bytes);
  }
}

void NcclCommunicator::wait_sends() {
  const auto deadline = Clock::now() + impl_->timeout;
  for (auto& p : impl_->pending)
    impl_->wait_done(p.channel, p.done, deadline,
                     "waiting for rank " + std::to_string(p.peer) + " to receive a transfer");
  impl_->reclaim();
}

#endif

}  // namespace flotilla::worker
