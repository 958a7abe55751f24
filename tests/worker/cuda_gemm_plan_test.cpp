// The CUDA backend's cuBLAS calls (worker/cuda/gemm_plan.h), executed on the CPU by a
// reference column-major GEMM written from the BLAS definition, must reproduce the CPU ops.
// This checks the error-prone part of the GPU path — transposes, leading dimensions, batch
// strides, which buffer is A and which is B — on machines without a GPU. The permutes and the
// softmax between the GEMMs are re-stated here in plain C++ (the CUDA kernels themselves are
// only checked by the CudaOps tests on a GPU). Double precision, tolerance 1e-12.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "worker/cuda/gemm_plan.h"
#include "worker/ops/attention.h"
#include "worker/ops/matmul.h"

namespace ops = flotilla::worker::ops;
using flotilla::worker::cuda::GemmCall;
using Vec = std::vector<double>;

namespace {

// C = alpha op(A) op(B) + beta C, column-major, per batch (BLAS sgemm semantics; C is not
// read when beta == 0).
void reference_gemm(const GemmCall& g, const double* A, const double* B, double* C) {
  for (int b = 0; b < g.batch; ++b) {
    const double* a = A + b * g.stride_a;
    const double* bb = B + b * g.stride_b;
    double* c = C + b * g.stride_c;
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int l = 0; l < g.k; ++l) {
          const double av = g.trans_a ? a[l + static_cast<long>(i) * g.lda] : a[i + static_cast<long>(l) * g.lda];
          const double bv = g.trans_b ? bb[j + static_cast<long>(l) * g.ldb] : bb[l + static_cast<long>(j) * g.ldb];
          sum += av * bv;
        }
        double& cv = c[i + static_cast<long>(j) * g.ldc];
        cv = g.alpha * sum + (g.beta == 0.f ? 0.0 : g.beta * cv);
      }
  }
}

Vec random_vec(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Vec v(n);
  for (double& x : v) x = u(rng);
  return v;
}

void expect_close(const Vec& got, const Vec& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

}  // namespace

TEST(GemmPlan, MatmulForwardAndBackward) {
  const int N = 5, IN = 7, OUT = 3;
  const Vec x = random_vec(N * IN, 1), w = random_vec(IN * OUT, 2), bias = random_vec(OUT, 3),
            dout = random_vec(N * OUT, 4), dinp0 = random_vec(N * IN, 5),
            dw0 = random_vec(IN * OUT, 6);
  // Forward with bias: out holds the bias rows, the GEMM adds onto them (beta = 1).
  Vec want(N * OUT), got(N * OUT);
  ops::matmul_forward(want.data(), x.data(), w.data(), bias.data(), N, IN, OUT);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OUT; ++o) got[n * OUT + o] = bias[o];
  reference_gemm(flotilla::worker::cuda::matmul_forward_gemm(N, IN, OUT, true), w.data(), x.data(),
                 got.data());
  expect_close(got, want, "forward+bias");
  // Without bias (beta = 0: whatever C held is ignored).
  ops::matmul_forward(want.data(), x.data(), w.data(), static_cast<const double*>(nullptr), N, IN, OUT);
  got.assign(N * OUT, 1e300);
  reference_gemm(flotilla::worker::cuda::matmul_forward_gemm(N, IN, OUT, false), w.data(), x.data(),
                 got.data());
  expect_close(got, want, "forward");
  // Backward, accumulating onto existing gradients.
  Vec want_dx = dinp0, want_dw = dw0, got_dx = dinp0, got_dw = dw0;
  ops::matmul_backward(want_dx.data(), want_dw.data(), static_cast<double*>(nullptr), dout.data(),
                       x.data(), w.data(), N, IN, OUT);
  reference_gemm(flotilla::worker::cuda::matmul_dinp_gemm(N, IN, OUT), w.data(), dout.data(),
                 got_dx.data());
  reference_gemm(flotilla::worker::cuda::matmul_dweight_gemm(N, IN, OUT), dout.data(), x.data(),
                 got_dw.data());
  expect_close(got_dx, want_dx, "dinp");
  expect_close(got_dw, want_dw, "dweight");
}

TEST(GemmPlan, AttentionForwardAndBackward) {
  namespace cu = flotilla::worker::cuda;
  const int B = 2, T = 5, NH = 3, HS = 4, C = NH * HS;
  const Vec qkv = random_vec(B * T * 3 * C, 7), dout = random_vec(B * T * C, 8);
  Vec want_out(B * T * C), want_att(B * NH * T * T), want_dqkv(B * T * 3 * C, 0.0);
  ops::attention_forward(want_out.data(), want_att.data(), qkv.data(), B, T, C, NH);
  ops::attention_backward(want_dqkv.data(), dout.data(), qkv.data(), want_att.data(), B, T, C, NH);

  // [B,T,(3,)NH,HS] <-> [B,NH,T,HS], as the permute kernels do.
  const std::size_t n = static_cast<std::size_t>(B) * T * C;
  auto head = [&](int b, int h, int t, int d) { return ((static_cast<std::size_t>(b) * NH + h) * T + t) * HS + d; };
  auto row = [&](int b, int t, int h, int d, int width) {
    return (static_cast<std::size_t>(b) * T + t) * width + h * HS + d;
  };
  Vec q(n), k(n), v(n), dy(n);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t)
        for (int d = 0; d < HS; ++d) {
          q[head(b, h, t, d)] = qkv[row(b, t, h, d, 3 * C)];
          k[head(b, h, t, d)] = qkv[row(b, t, h, d, 3 * C) + C];
          v[head(b, h, t, d)] = qkv[row(b, t, h, d, 3 * C) + 2 * C];
          dy[head(b, h, t, d)] = dout[row(b, t, h, d, C)];
        }
  const float scale = 1.f / std::sqrt(static_cast<float>(HS));
  Vec att(static_cast<std::size_t>(B) * NH * T * T, 1e300);
  reference_gemm(cu::attention_scores_gemm(B, T, NH, HS, scale), k.data(), q.data(), att.data());
  for (int r = 0; r < B * NH * T; ++r) {  // causal softmax per row
    const int t = r % T;
    double* a = att.data() + static_cast<std::size_t>(r) * T;
    double maxv = -INFINITY, sum = 0;
    for (int j = 0; j <= t; ++j) maxv = std::max(maxv, a[j]);
    for (int j = 0; j <= t; ++j) sum += (a[j] = std::exp(a[j] - maxv));
    for (int j = 0; j < T; ++j) a[j] = j <= t ? a[j] / sum : 0.0;
  }
  // ops uses the scale in double, the plan in float: compare at float-scale precision.
  for (std::size_t i = 0; i < att.size(); ++i) ASSERT_NEAR(att[i], want_att[i], 1e-6) << i;
  Vec y(n, 1e300);
  reference_gemm(cu::attention_values_gemm(B, T, NH, HS), v.data(), att.data(), y.data());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t)
        for (int d = 0; d < HS; ++d)
          ASSERT_NEAR(y[head(b, h, t, d)], want_out[row(b, t, h, d, C)], 1e-6);

  // Backward: datt, dv, softmax backward (scale folded in), dq, dk, scatter.
  Vec datt(att.size(), 1e300), dv(n, 1e300), dq(n, 1e300), dk(n, 1e300);
  reference_gemm(cu::attention_datt_gemm(B, T, NH, HS), v.data(), dy.data(), datt.data());
  reference_gemm(cu::attention_dv_gemm(B, T, NH, HS), dy.data(), att.data(), dv.data());
  for (int r = 0; r < B * NH * T; ++r) {
    const int t = r % T;
    const double* a = att.data() + static_cast<std::size_t>(r) * T;
    double* d = datt.data() + static_cast<std::size_t>(r) * T;
    double dot = 0;
    for (int j = 0; j <= t; ++j) dot += a[j] * d[j];
    for (int j = 0; j < T; ++j) d[j] = j <= t ? a[j] * (d[j] - dot) * scale : 0.0;
  }
  reference_gemm(cu::attention_dq_gemm(B, T, NH, HS), k.data(), datt.data(), dq.data());
  reference_gemm(cu::attention_dk_gemm(B, T, NH, HS), q.data(), datt.data(), dk.data());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t)
        for (int d = 0; d < HS; ++d) {
          const std::size_t r = row(b, t, h, d, 3 * C);
          ASSERT_NEAR(dq[head(b, h, t, d)], want_dqkv[r], 1e-6) << "dq";
          ASSERT_NEAR(dk[head(b, h, t, d)], want_dqkv[r + C], 1e-6) << "dk";
          ASSERT_NEAR(dv[head(b, h, t, d)], want_dqkv[r + 2 * C], 1e-6) << "dv";
        }
}
