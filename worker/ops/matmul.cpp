#include "worker/ops/matmul.h"

#include <algorithm>
#include <vector>

namespace flotilla::worker::ops {
namespace {

enum class Init {
  kOverwrite,   // C = init_row[p] (bias or 0) + sum_k a*b
  kAddSum,      // C = C + (0 + sum_k a*b)
  kAccumulate,  // C = ((C + a0*b0) + a1*b1) + ...
};

// C[m, p] op= sum over k ascending of a(m, k) * b(k, p), with a(m, k) = A[m*a_row + k*a_col]
// and b(k, p) = B[k*ldb + p]. The MR x NR register block changes which elements are computed
// together, never the order of any element's sum, so every blocking gives the same bits.
template <class T, int kVecBytes>
[[gnu::always_inline]] inline void gemm_blocked(T* C, long ldc, const T* A, long a_row,
                                                long a_col, const T* B, long ldb, const T* bias,
                                                int M, int P, int K, Init init) {
  // Two vectors per row of the block, 4 rows: 8 accumulator registers. GCC/Clang vector
  // extensions give element-wise IEEE mul and add, nothing fused (fp contraction is off).
  typedef T Vec __attribute__((vector_size(kVecBytes)));
  constexpr int kLanes = static_cast<int>(kVecBytes / sizeof(T));
  constexpr int MR = 4;
  constexpr int NR = 2 * kLanes;
#define FLOTILLA_LOAD(dst, p) __builtin_memcpy(&(dst), (p), sizeof(Vec))
  for (int m0 = 0; m0 < M; m0 += MR) {
    const int mr = M - m0 < MR ? M - m0 : MR;
    for (int p0 = 0; p0 < P; p0 += NR) {
      const int pr = P - p0 < NR ? P - p0 : NR;
      if (mr == MR && pr == NR) {
        Vec acc[MR][2];
        for (int r = 0; r < MR; ++r) {
          T* c = C + (m0 + r) * ldc + p0;
          if (init == Init::kAccumulate) {
            FLOTILLA_LOAD(acc[r][0], c);
            FLOTILLA_LOAD(acc[r][1], c + kLanes);
          } else if (init == Init::kOverwrite && bias) {
            FLOTILLA_LOAD(acc[r][0], bias + p0);
            FLOTILLA_LOAD(acc[r][1], bias + p0 + kLanes);
          } else {
            acc[r][0] = Vec{};
            acc[r][1] = Vec{};
          }
        }
        const T* a0 = A + (m0 + 0) * a_row;
        const T* a1 = A + (m0 + 1) * a_row;
        const T* a2 = A + (m0 + 2) * a_row;
        const T* a3 = A + (m0 + 3) * a_row;
        for (int k = 0; k < K; ++k) {
          const T* b = B + k * ldb + p0;
          Vec b0, b1;
          FLOTILLA_LOAD(b0, b);
          FLOTILLA_LOAD(b1, b + kLanes);
          const long ka = k * a_col;
          const T x0 = a0[ka], x1 = a1[ka], x2 = a2[ka], x3 = a3[ka];
          acc[0][0] += x0 * b0;
          acc[0][1] += x0 * b1;
          acc[1][0] += x1 * b0;
          acc[1][1] += x1 * b1;
          acc[2][0] += x2 * b0;
          acc[2][1] += x2 * b1;
          acc[3][0] += x3 * b0;
          acc[3][1] += x3 * b1;
        }
        for (int r = 0; r < MR; ++r) {
          T* c = C + (m0 + r) * ldc + p0;
          if (init == Init::kAddSum) {
            Vec c0, c1;
            FLOTILLA_LOAD(c0, c);
            FLOTILLA_LOAD(c1, c + kLanes);
            acc[r][0] = c0 + acc[r][0];
            acc[r][1] = c1 + acc[r][1];
          }
          __builtin_memcpy(c, &acc[r][0], sizeof(Vec));
          __builtin_memcpy(c + kLanes, &acc[r][1], sizeof(Vec));
        }
        continue;
      }
      // Edge blocks: the same per-element order, scalar.
      for (int r = 0; r < mr; ++r) {
        T* c = C + (m0 + r) * ldc + p0;
        for (int j = 0; j < pr; ++j) {
          T acc = T(0);
          if (init == Init::kOverwrite && bias) acc = bias[p0 + j];
          if (init == Init::kAccumulate) acc = c[j];
          for (int k = 0; k < K; ++k) acc += A[(m0 + r) * a_row + k * a_col] * B[k * ldb + p0 + j];
          c[j] = init == Init::kAddSum ? c[j] + acc : acc;
        }
      }
    }
  }
}
#undef FLOTILLA_LOAD

// Same arithmetic, one vector width or the other: SSE2 (every x86-64) or AVX2 where the CPU
// has it. Neither uses FMA, so both give identical bits and a job may mix machines.
template <class T>
void gemm_generic(T* C, long ldc, const T* A, long a_row, long a_col, const T* B, long ldb,
                  const T* bias, int M, int P, int K, Init init) {
  gemm_blocked<T, 16>(C, ldc, A, a_row, a_col, B, ldb, bias, M, P, K, init);
}

bool cpu_has_avx2() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();  // we may run from a static initializer, before libgcc's
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void gemm_avx2(float* C, long ldc, const float* A, long a_row,
                                               long a_col, const float* B, long ldb,
                                               const float* bias, int M, int P, int K, Init init) {
  gemm_blocked<float, 32>(C, ldc, A, a_row, a_col, B, ldb, bias, M, P, K, init);
}
#endif
bool g_use_avx2 = cpu_has_avx2();

template <class T>
void gemm(T* C, long ldc, const T* A, long a_row, long a_col, const T* B, long ldb, const T* bias,
          int M, int P, int K, Init init) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (sizeof(T) == sizeof(float)) {
    if (g_use_avx2) return gemm_avx2(C, ldc, A, a_row, a_col, B, ldb, bias, M, P, K, init);
  }
#endif
  gemm_generic<T>(C, ldc, A, a_row, a_col, B, ldb, bias, M, P, K, init);
}

}  // namespace

bool matmul_use_avx2(bool allow) {
  g_use_avx2 = allow && cpu_has_avx2();
  return g_use_avx2;
}

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int IN,
                    int OUT) {
  // out[n, o] = bias[o] + sum_i inp[n, i] * w[i, o]
  gemm<T>(out, OUT, inp, IN, 1, weight, OUT, bias, N, OUT, IN, Init::kOverwrite);
}

template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                     const T* weight, int N, int IN, int OUT) {
  if (dinp) {
    // dinp[n, i] += sum_o dout[n, o] * w^T[o, i]; w^T makes the inner block contiguous.
    std::vector<T> wt(static_cast<std::size_t>(IN) * OUT);
    for (int i = 0; i < IN; ++i)
      for (int o = 0; o < OUT; ++o)
        wt[static_cast<std::size_t>(o) * IN + i] = weight[static_cast<long>(i) * OUT + o];
    gemm<T>(dinp, IN, dout, OUT, 1, wt.data(), IN, nullptr, N, IN, OUT, Init::kAddSum);
  }
  // dweight[i, o] accumulates inp[n, i] * dout[n, o] for n ascending.
  gemm<T>(dweight, OUT, inp, 1, IN, dout, OUT, nullptr, IN, OUT, N, Init::kAccumulate);
  if (dbias) {
    for (int n = 0; n < N; ++n) {
      const T* d = dout + static_cast<long>(n) * OUT;
      for (int o = 0; o < OUT; ++o) dbias[o] += d[o];
    }
  }
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int,
                                    int);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int,
                                     int, int);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*,
                                     const float*, int, int, int);
template void matmul_backward<double>(double*, double*, double*, const double*, const double*,
                                      const double*, int, int, int);

}  // namespace flotilla::worker::ops
