// Backend: where the model's buffers live and which kernels run on them (CPU or CUDA).
//
// Contract:
//  - Every pointer passed to an op was returned by allocate() of the same backend ("device"
//    memory: host memory for the CPU backend, GPU memory for CUDA).
//  - allocate() returns zeroed memory. copy_to_host/copy_from_host are synchronous.
//  - Ops follow the CPU reference in worker/ops/ exactly in meaning (shapes, layouts, and
//    ACCUMULATE semantics: every *_backward adds into its gradient outputs, including the
//    input gradient; callers zero them when they need a fresh sum).
//  - Matrix layout: weights are [in, out] row-major, activations [N, features] row-major.
//  - Determinism: the CPU backend is single-threaded and bit-deterministic; results depend only
//    on the inputs. The CUDA backend avoids atomics (embedding backward scans per row) and
//    reduces grad sums in a fixed tree, so it is run-to-run deterministic for one GPU model and
//    one cuBLAS version, but it does not match the CPU bit-for-bit (see the CUDA-vs-CPU tests
//    for the tolerance).
// Caveat: one thread uses a Backend at a time (the CPU backend's buffer pool and the CUDA
// backend's cuBLAS handle are not synchronized).
// Caveat: the CUDA backend exists only when built with FLOTILLA_CUDA (FLOTILLA_HAVE_CUDA=1)
// and a GPU is present; make_backend("cuda") returns an error string otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace flotilla::worker {

// Thrown when host (CPU backend) or GPU (CUDA backend) memory runs out. what() is one line that
// names what was being allocated, how many bytes, and what to do; flotilla-worker exits 2 on it
// (a job that does not fit is a layout problem, not a crash).
class OutOfMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// "1.50 GiB (1610612736 bytes)"
std::string bytes_text(std::size_t bytes);

class Backend;
// "; usable GPU memory 4600000 bytes" where the backend knows it, else "": the phrase the
// operator reads to learn how much the GPU really offers (operator/memory_headroom.h).
std::string out_of_memory_note(const Backend& backend);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // What an out-of-memory error names: "GPU" (CUDA, an emulated GPU) or "host" (plain CPU).
  virtual std::string_view memory_kind() const { return "GPU"; }
  // High-water mark of the bytes held through allocate_bytes(); 0 where not tracked.
  virtual std::size_t peak_bytes() const { return 0; }
  // The device whose memory peak_bytes() measures: its GPU type (an emulated type, or the CUDA
  // device's name) and capacity. Empty where there is no such device (plain CPU).
  struct DeviceMemory {
    std::string gpu_type;
    std::size_t capacity_bytes = 0;
  };
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  // What this process may hold on its GPU at most, where known exactly (an emulated GPU's limit);
  // an out-of-GPU-memory line names it (out_of_memory_note()) so the operator can learn from it.
  virtual std::optional<std::size_t> usable_bytes() const { return std::nullopt; }

  // Throws OutOfMemoryError when the memory is not there.
  virtual void* allocate_bytes(std::size_t bytes) = 0;
  virtual void release(void* pointer) = 0;
  virtual void zero(void* pointer, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
  virtual void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_device(void* device_dst, const void* device_src, std::size_t bytes) = 0;
  // Waits for all queued work (GPU backends run asynchronously); a no-op on the CPU.
  virtual void synchronize() {}

  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
  virtual void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                                 const float* wpe, int B, int T, int C) = 0;
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout,
                                  const std::int32_t* tokens, int B, int T, int C, int V) = 0;
  // Per row of C: out = (x - mean) * rstd * w + b; saves mean, rstd (N each).
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // out[N,OUT] = inp[N,IN] @ weight[IN,OUT] (+ bias[OUT] when bias != nullptr)
  virtual void matmul_forward(float* out, const float* inp, const float* weight,
                              const float* bias, int N, int IN, int OUT) = 0;
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int IN,
                               int OUT) = 0;
  // qkv [B,T,3C] (q | k | v, heads contiguous within each), out [B,T,C], att [B,NH,T,T]
  // holds the causal softmax (saved for backward).
  virtual void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                                 int NH) = 0;
  virtual void attention_backward(float* dqkv, const float* dout, const float* qkv,
                                  const float* att, int B, int T, int C, int NH) = 0;
  virtual void gelu_forward(float* out, const float* inp, std::size_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout,
                             std::size_t n) = 0;
  // out = a + b
  virtual void residual_forward(float* out, const float* a, const float* b, std::size_t n) = 0;
  // da += dout; db += dout
  virtual void residual_backward(float* da, float* db, const float* dout, std::size_t n) = 0;
  // dst += src
  virtual void accumulate(float* dst, const float* src, std::size_t n) = 0;
  // probs[N,V] = softmax(logits); losses[N] = -log probs[n, targets[n]]
  virtual void cross_entropy_forward(float* losses, float* probs, const float* logits,
                                     const std::int32_t* targets, int N, int V) = 0;
  // dlogits += (probs - onehot(targets)) * dloss   (dloss: d total / d loss of each row)
  virtual void cross_entropy_backward(float* dlogits, const float* probs,
                                      const std::int32_t* targets, float dloss, int N,
                                      int V) = 0;
  // Sum of squares in double, in a fixed order (deterministic for a given backend).
  virtual double sum_squares(const float* x, std::size_t n) = 0;
  // One AdamW step over n parameters (see optimizer.h for the formula). decay_mask[i] != 0
  // applies weight decay; grads are multiplied by grad_scale first (clipping).
  virtual void adamw(float* params, const float* grads, float* m, float* v,
                     const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1,
                     float beta2, float eps, float weight_decay, float grad_scale,
                     std::int64_t t) = 0;
};

// "cpu" always works; "cuda" (FP32 GEMMs) and "cuda-tf32" (TF32 tensor-core GEMMs) work when
// compiled with CUDA and a GPU is visible.
// On failure returns nullptr and sets *error to one line saying why.
std::unique_ptr<Backend> make_backend(std::string_view name, std::string* error);
bool cuda_compiled();
// Number of visible CUDA devices (0 when not compiled with CUDA or none present).
int cuda_device_count();
// UUID of this process's CUDA device 0, empty when there is none (or no CUDA in this build).
std::string cuda_device_identity();

// A typed owning buffer on a backend. Move-only.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, std::size_t count)
      : backend_(&backend), count_(count),
        data_(count ? static_cast<T*>(backend.allocate_bytes(count * sizeof(T))) : nullptr) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) backend_->release(data_);
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  void zero() {
    if (data_) backend_->zero(data_, bytes());
  }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(count_, other.count_);
    std::swap(data_, other.data_);
  }
  Backend* backend_ = nullptr;
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

}  // namespace flotilla::worker
