#include "worker/ops/matmul.h"

#include <algorithm>
#include <cstring>
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
template <class T>
void gemm_blocked(T* C, long ldc, const T* A, long a_row, long a_col, const T* B, long ldb,
                  const T* bias, int M, int P, int K, Init init) {
  // Two 16-byte vectors per row of the block (8 floats or 4 doubles), 4 rows: 8 accumulator
  // registers. GCC/Clang vector extensions give element-wise IEEE mul and add, nothing fused.
  typedef T Vec __attribute__((vector_size(16)));
  constexpr int kLanes = static_cast<int>(16 / sizeof(T));
  constexpr int MR = 4;
  constexpr int NR = 2 * kLanes;
  auto load = [](const T* p) {
    Vec v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  for (int m0 = 0; m0 < M; m0 += MR) {
    const int mr = std::min(MR, M - m0);
    for (int p0 = 0; p0 < P; p0 += NR) {
      const int pr = std::min(NR, P - p0);
      if (mr == MR && pr == NR) {
        Vec acc[MR][2];
        for (int r = 0; r < MR; ++r) {
          T* c = C + (m0 + r) * ldc + p0;
          if (init == Init::kAccumulate) {
            acc[r][0] = load(c);
            acc[r][1] = load(c + kLanes);
          } else if (init == Init::kOverwrite && bias) {
            acc[r][0] = load(bias + p0);
            acc[r][1] = load(bias + p0 + kLanes);
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
          const Vec b0 = load(b), b1 = load(b + kLanes);
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
            acc[r][0] = load(c) + acc[r][0];
            acc[r][1] = load(c + kLanes) + acc[r][1];
          }
          std::memcpy(c, &acc[r][0], sizeof(Vec));
          std::memcpy(c + kLanes, &acc[r][1], sizeof(Vec));
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

}  // namespace

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int IN,
                    int OUT) {
  // out[n, o] = bias[o] + sum_i inp[n, i] * w[i, o]
  gemm_blocked<T>(out, OUT, inp, IN, 1, weight, OUT, bias, N, OUT, IN, Init::kOverwrite);
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
    gemm_blocked<T>(dinp, IN, dout, OUT, 1, wt.data(), IN, nullptr, N, IN, OUT, Init::kAddSum);
  }
  // dweight[i, o] accumulates inp[n, i] * dout[n, o] for n ascending.
  gemm_blocked<T>(dweight, OUT, inp, 1, IN, dout, OUT, nullptr, IN, OUT, N, Init::kAccumulate);
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
