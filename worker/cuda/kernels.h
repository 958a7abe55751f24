// Host-side launchers for the CUDA kernels, one .cu file per op. Pointers are device pointers;
// the meaning of every launcher is the CPU reference op of the same name in worker/ops/.
// Scratch memory is taken from the stream-ordered pool inside the launcher.
#pragma once

#include <cstddef>
#include <cstdint>

struct cublasContext;

namespace flotilla::worker::cuda {

struct GemmCall;
// Executes a plan from gemm_plan.h with cuBLAS (SGEMM, or strided-batched when batch > 1).
void run_gemm(cublasContext* handle, const GemmCall& call, const float* A, const float* B,
              float* C);

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       int B, int T, int C);
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        int B, int T, int C, int V);
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C);
// column_sum_accumulate: acc[c] += sum_n x[n, c] in fixed chunk order.
void column_sum_accumulate(float* acc, const float* x, int N, int C);
void matmul_forward(cublasContext* handle, float* out, const float* inp, const float* weight,
                    const float* bias, int N, int IN, int OUT);
void matmul_backward(cublasContext* handle, float* dinp, float* dweight, float* dbias,
                     const float* dout, const float* inp, const float* weight, int N, int IN,
                     int OUT);
void attention_forward(cublasContext* handle, float* out, float* att, const float* qkv, int B,
                       int T, int C, int NH);
void attention_backward(cublasContext* handle, float* dqkv, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH);
void gelu_forward(float* out, const float* inp, std::size_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n);
void residual_forward(float* out, const float* a, const float* b, std::size_t n);
void residual_backward(float* da, float* db, const float* dout, std::size_t n);
void accumulate(float* dst, const float* src, std::size_t n);
void cross_entropy_forward(float* losses, float* probs, const float* logits,
                           const std::int32_t* targets, int N, int V);
void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                            float dloss, int N, int V);
double sum_squares(const float* x, std::size_t n);
void adamw(float* params, const float* grads, float* m, float* v, const std::uint8_t* decay_mask,
           std::size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
           float grad_scale, std::int64_t t);

// Stream-ordered scratch allocation (cudaMallocAsync on the default stream).
void* scratch_alloc(std::size_t bytes);
void scratch_free(void* p);

}  // namespace flotilla::worker::cuda
