#include "worker/model/cpu_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker/model/optimizer.h"
#include "worker/ops/attention.h"
#include "worker/ops/cross_entropy.h"
#include "worker/ops/embedding.h"
#include "worker/ops/gelu.h"
#include "worker/ops/layernorm.h"
#include "worker/ops/matmul.h"
#include "worker/ops/residual.h"

#if FLOTILLA_HAVE_CUDA
#include "worker/cuda/cuda_backend.h"
#endif

namespace flotilla::worker {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  CpuBackend(std::size_t memory_limit_bytes, std::string emulated_gpu_type)
      : limit_bytes_(memory_limit_bytes), emulated_type_(std::move(emulated_gpu_type)) {}
  ~CpuBackend() override {
    for (auto& [bytes, blocks] : free_blocks_)
      for (void* p : blocks) std::free(p);
  }
  std::string_view name() const override { return "cpu"; }
  std::string_view memory_kind() const override { return emulated_type_.empty() ? "host" : "GPU"; }
  std::size_t peak_bytes() const override { return peak_bytes_; }
  std::optional<std::size_t> usable_bytes() const override {
    if (emulated_type_.empty()) return std::nullopt;
    return limit_bytes_;
  }
  std::optional<DeviceMemory> device_memory() const override {
    if (emulated_type_.empty()) return std::nullopt;  // host memory: no device to report on
    return DeviceMemory{emulated_type_, limit_bytes_};
  }
  // A per-size free list: a training step allocates the same buffer sizes every micro-batch,
  // and reusing them avoids the page faults of fresh mmap'ed memory (~4% of a step).
  void* allocate_bytes(std::size_t bytes) override {
    bytes = bytes ? bytes : 1;
    // An emulated GPU's memory: live bytes are what the model holds, as a caching allocator's
    // in-use bytes on a GPU (the free list is the cache, not counted).
    if (limit_bytes_ > 0 && live_bytes_ + bytes > limit_bytes_)
      throw OutOfMemoryError("out of GPU memory: could not allocate " + bytes_text(bytes) + " (emulated " +
                             emulated_type_ + ": " + bytes_text(live_bytes_) + " in use of " +
                             bytes_text(limit_bytes_) + ")");
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    auto it = free_blocks_.find(bytes);
    if (it != free_blocks_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      std::memset(p, 0, bytes);
      sizes_[p] = bytes;
      return p;
    }
    void* p = std::calloc(bytes, 1);
    if (!p) {
      live_bytes_ -= bytes;
      throw OutOfMemoryError("out of host memory: could not allocate " + bytes_text(bytes));
    }
    sizes_[p] = bytes;
    return p;
  }
  void release(void* p) override {
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    live_bytes_ -= it->second;
    free_blocks_[it->second].push_back(p);
    sizes_.erase(it);
  }
  void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                         const float* wpe, int B, int T, int C) override {
    ops::embedding_forward(out, tokens, wte, wpe, B, T, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          int B, int T, int C, int) override {
    ops::embedding_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override {
    ops::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override {
    ops::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int IN, int OUT) override {
    ops::matmul_forward(out, inp, weight, bias, N, IN, OUT);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int IN, int OUT) override {
    ops::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, IN, OUT);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    ops::attention_forward(out, att, qkv, B, T, C, NH);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                          int B, int T, int C, int NH) override {
    ops::attention_backward(dqkv, dout, qkv, att, B, T, C, NH);
  }
  void gelu_forward(float* out, const float* inp, std::size_t n) override {
    ops::gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) override {
    ops::gelu_backward(dinp, inp, dout, n);
  }
  void residual_forward(float* out, const float* a, const float* b, std::size_t n) override {
    ops::residual_forward(out, a, b, n);
  }
  void residual_backward(float* da, float* db, const float* dout, std::size_t n) override {
    ops::residual_backward(da, db, dout, n);
  }
  void accumulate(float* dst, const float* src, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
  }
  void cross_entropy_forward(float* losses, float* probs, const float* logits,
                             const std::int32_t* targets, int N, int V) override {
    ops::cross_entropy_forward(losses, probs, logits, targets, N, V);
  }
  void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                              float dloss, int N, int V) override {
    ops::cross_entropy_backward(dlogits, probs, targets, dloss, N, V);
  }
  double sum_squares(const float* x, std::size_t n) override {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    return s;
  }
  void adamw(float* params, const float* grads, float* m, float* v,
             const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1, float beta2,
             float eps, float weight_decay, float grad_scale, std::int64_t t) override {
    adamw_cpu(params, grads, m, v, decay_mask, n, lr, beta1, beta2, eps, weight_decay,
              grad_scale, t);
  }

 private:
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t limit_bytes_ = 0;  // 0: host memory, no limit but the machine's
  std::string emulated_type_;
  std::size_t live_bytes_ = 0;
  std::size_t peak_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

std::unique_ptr<Backend> make_emulated_gpu_backend(std::size_t memory_bytes, const std::string& gpu_type) {
  return std::make_unique<CpuBackend>(memory_bytes, gpu_type);
}

std::string bytes_text(std::size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB (%zu bytes)",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), bytes);
  return buf;
}

std::string out_of_memory_note(const Backend& backend) {
  const std::optional<std::size_t> usable = backend.usable_bytes();
  return usable ? "; usable GPU memory " + std::to_string(*usable) + " bytes" : "";
}

bool cuda_compiled() {
#if FLOTILLA_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#if FLOTILLA_HAVE_CUDA
  return cuda_visible_device_count();
#else
  return 0;
#endif
}

std::string cuda_device_identity() {
#if FLOTILLA_HAVE_CUDA
  return cuda_device_uuid();
#else
  return {};
#endif
}

std::unique_ptr<Backend> make_backend(std::string_view name, std::string* error) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda" || name == "cuda-tf32") {
#if FLOTILLA_HAVE_CUDA
    return make_cuda_backend(error, name == "cuda-tf32");
#else
    if (error) *error = "backend 'cuda' is not available: this build has no CUDA (nvcc not found)";
    return nullptr;
#endif
  }
  if (error) *error = "unknown backend '" + std::string(name) + "' (use 'cpu', 'cuda' or 'cuda-tf32')";
  return nullptr;
}

}  // namespace flotilla::worker
