// CudaBackend: wires Backend's ops to the kernels in worker/cuda/*.cu and owns the cuBLAS
// handle. See cuda_backend.h for the contract.
#include "worker/cuda/cuda_backend.h"

#include "worker/cuda/common.cuh"
#include "worker/cuda/kernels.h"

namespace flotilla::worker {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(bool allow_tf32) : tf32_(allow_tf32) {
    FLOTILLA_CUDA_CHECK(cublasCreate(&handle_));
    FLOTILLA_CUDA_CHECK(cublasSetMathMode(
        handle_, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    // Keep freed pool memory cached instead of returning it to the driver at each sync.
    cudaMemPool_t pool;
    FLOTILLA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    unsigned long long threshold = ~0ULL;
    FLOTILLA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    // Every buffer (model, activations, kernels' scratch) comes from this pool, so its
    // used-memory high-water mark is the rank's peak as the planner predicts it (bytes in use,
    // not the cache). Reset it: an earlier backend in this process is not this run's peak.
    unsigned long long zero = 0;
    FLOTILLA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    pool_ = pool;
  }
  ~CudaBackend() override { cublasDestroy(handle_); }

  std::string_view name() const override { return tf32_ ? "cuda-tf32" : "cuda"; }
  std::optional<DeviceMemory> device_memory() const override {
    int device = 0;
    FLOTILLA_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp props{};
    FLOTILLA_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
    return DeviceMemory{props.name, props.totalGlobalMem};
  }
  // What this process may still hold: the device's free memory plus what its pool keeps in
  // reserve (cudaMallocAsync tried both before it failed); the context and other processes'
  // memory are outside it. Read after an out-of-memory error, for its line.
  std::optional<std::size_t> usable_bytes() const override {
    std::size_t free_bytes = 0, total_bytes = 0;
    unsigned long long reserved_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved_bytes) != cudaSuccess) {
      cudaGetLastError();  // leave no error behind for the next launch check
      return std::nullopt;
    }
    return free_bytes + static_cast<std::size_t>(reserved_bytes);
  }
  std::size_t peak_bytes() const override {
    unsigned long long used_high_bytes = 0;
    FLOTILLA_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &used_high_bytes));
    return static_cast<std::size_t>(used_high_bytes);
  }
  void* allocate_bytes(std::size_t bytes) override {
    void* p = cuda::scratch_alloc(bytes ? bytes : 1);
    FLOTILLA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes ? bytes : 1, 0));
    return p;
  }
  void release(void* p) override { cuda::scratch_free(p); }
  void zero(void* p, std::size_t bytes) override {
    FLOTILLA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0));
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) FLOTILLA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) FLOTILLA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_device(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) FLOTILLA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
  }
  void synchronize() override { FLOTILLA_CUDA_CHECK(cudaDeviceSynchronize()); }

  void embedding_forward(float* out, const std::int32_t* tokens, const float* wte,
                         const float* wpe, int B, int T, int C) override {
    cuda::embedding_forward(out, tokens, wte, wpe, B, T, C);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                          int B, int T, int C, int V) override {
    cuda::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, V);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override {
    cuda::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override {
    cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                      int IN, int OUT) override {
    cuda::matmul_forward(handle_, out, inp, weight, bias, N, IN, OUT);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, int N, int IN, int OUT) override {
    cuda::matmul_backward(handle_, dinp, dweight, dbias, dout, inp, weight, N, IN, OUT);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    cuda::attention_forward(handle_, out, att, qkv, B, T, C, NH);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                          int B, int T, int C, int NH) override {
    cuda::attention_backward(handle_, dqkv, dout, qkv, att, B, T, C, NH);
  }
  void gelu_forward(float* out, const float* inp, std::size_t n) override {
    cuda::gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) override {
    cuda::gelu_backward(dinp, inp, dout, n);
  }
  void residual_forward(float* out, const float* a, const float* b, std::size_t n) override {
    cuda::residual_forward(out, a, b, n);
  }
  void residual_backward(float* da, float* db, const float* dout, std::size_t n) override {
    cuda::residual_backward(da, db, dout, n);
  }
  void accumulate(float* dst, const float* src, std::size_t n) override {
    cuda::accumulate(dst, src, n);
  }
  void cross_entropy_forward(float* losses, float* probs, const float* logits,
                             const std::int32_t* targets, int N, int V) override {
    cuda::cross_entropy_forward(losses, probs, logits, targets, N, V);
  }
  void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                              float dloss, int N, int V) override {
    cuda::cross_entropy_backward(dlogits, probs, targets, dloss, N, V);
  }
  double sum_squares(const float* x, std::size_t n) override { return cuda::sum_squares(x, n); }
  void adamw(float* params, const float* grads, float* m, float* v,
             const std::uint8_t* decay_mask, std::size_t n, float lr, float beta1, float beta2,
             float eps, float weight_decay, float grad_scale, std::int64_t t) override {
    cuda::adamw(params, grads, m, v, decay_mask, n, lr, beta1, beta2, eps, weight_decay,
                grad_scale, t);
  }

 private:
  bool tf32_;
  cublasHandle_t handle_ = nullptr;
  cudaMemPool_t pool_ = nullptr;  // the device's default pool, which scratch_alloc draws on
};

}  // namespace

namespace cuda {
void* scratch_alloc(std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes ? bytes : 1, 0);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky, but leave nothing behind for the next launch check
    throw OutOfMemoryError("out of GPU memory: could not allocate " + bytes_text(bytes) +
                           " (cudaMallocAsync)");
  }
  check(err, "cudaMallocAsync(scratch)");
  return p;
}
void scratch_free(void* p) {
  if (p) FLOTILLA_CUDA_CHECK(cudaFreeAsync(p, 0));
}
}  // namespace cuda

int cuda_visible_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

std::string cuda_device_name() {
  if (cuda_visible_device_count() == 0) return {};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
  return prop.name;
}

std::string cuda_device_uuid() {
  if (cuda_visible_device_count() == 0) return {};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {};
  static const char* hex = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

std::unique_ptr<Backend> make_cuda_backend(std::string* error, bool allow_tf32) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (error)
      *error = std::string("no CUDA device visible (cudaGetDeviceCount: ") +
               (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") + ")";
    cudaGetLastError();
    return nullptr;
  }
  try {
    return std::make_unique<CudaBackend>(allow_tf32);
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}

}  // namespace flotilla::worker
