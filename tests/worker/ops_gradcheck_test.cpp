// Golden tests for worker/ops: every op's backward against central finite differences of its
// own forward, run in double precision (h = 1e-5, so truncation error ~1e-10 and rounding
// error ~1e-11: a tolerance of 1e-6 relative is far from both, and far below any real bug);
// the float instantiation against the double one; and a few hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "worker/ops/attention.h"
#include "worker/ops/cross_entropy.h"
#include "worker/ops/embedding.h"
#include "worker/ops/exp.h"
#include "worker/ops/gelu.h"
#include "worker/ops/layernorm.h"
#include "worker/ops/matmul.h"
#include "worker/ops/residual.h"

namespace ops = flotilla::worker::ops;
using Vec = std::vector<double>;

namespace {

Vec random_vec(std::size_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Vec v(n);
  for (double& x : v) x = u(rng);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// objective(x) = <forward(x), R>; checks analytic grad (w.r.t. x) against central differences.
void expect_grad_matches(Vec& x, const Vec& analytic, const std::function<double()>& objective,
                         const char* what) {
  constexpr double h = 1e-5;
  ASSERT_EQ(x.size(), analytic.size()) << what;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = objective();
    x[i] = saved - h;
    const double down = objective();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double err = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, err);
    ASSERT_LT(err, 1e-6) << what << "[" << i << "]: numeric " << numeric << " analytic "
                         << analytic[i];
  }
  ::testing::Test::RecordProperty(what, std::to_string(worst));
}

std::vector<float> to_float(const Vec& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST(OpsGradcheck, MatmulWithBias) {
  std::mt19937_64 rng(1);
  const int N = 5, IN = 7, OUT = 6;  // N not a multiple of the 4-row tile: both paths run
  Vec x = random_vec(N * IN, rng), w = random_vec(IN * OUT, rng), b = random_vec(OUT, rng);
  const Vec R = random_vec(N * OUT, rng);
  Vec out(N * OUT);
  auto objective = [&] {
    ops::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, IN, OUT);
    return dot(out, R);
  };
  Vec dx(N * IN, 0.0), dw(IN * OUT, 0.0), db(OUT, 0.0);
  ops::matmul_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(), N, IN, OUT);
  expect_grad_matches(x, dx, objective, "matmul.dinp");
  expect_grad_matches(w, dw, objective, "matmul.dweight");
  expect_grad_matches(b, db, objective, "matmul.dbias");
}

TEST(OpsGradcheck, MatmulHandComputedAndAccumulates) {
  // [1 2; 3 4] @ [5 6; 7 8] + [1, -1] = [20 21; 44 49]
  const float x[] = {1, 2, 3, 4}, w[] = {5, 6, 7, 8}, b[] = {1, -1};
  float out[4];
  ops::matmul_forward(out, x, w, b, 2, 2, 2);
  EXPECT_EQ(out[0], 20.0f);
  EXPECT_EQ(out[1], 21.0f);
  EXPECT_EQ(out[2], 44.0f);
  EXPECT_EQ(out[3], 49.0f);
  // Backward adds to what is already there: dx = 10 + dout @ w^T with dout = ones.
  float dx[4] = {10, 10, 10, 10}, dw[4] = {}, db[2] = {};
  const float ones[4] = {1, 1, 1, 1};
  ops::matmul_backward(dx, dw, db, ones, x, w, 2, 2, 2);
  EXPECT_EQ(dx[0], 10.0f + 5 + 6);
  EXPECT_EQ(dx[1], 10.0f + 7 + 8);
  EXPECT_EQ(dw[0], 1.0f + 3);  // sum over rows of x[:,0]
  EXPECT_EQ(db[0], 2.0f);
}

TEST(OpsGradcheck, MatmulSameBitsWithAndWithoutAvx2) {
  // Odd sizes so full register blocks and scalar edges both run.
  const int N = 37, IN = 29, OUT = 45;
  std::mt19937_64 rng(21);
  auto f = [&](std::size_t n) {
    const Vec d = random_vec(n, rng);
    return to_float(d);
  };
  const auto x = f(N * IN), w = f(IN * OUT), b = f(OUT), dout = f(N * OUT);
  std::vector<std::vector<float>> results[2];
  for (int pass = 0; pass < 2; ++pass) {
    const bool avx2 = ops::matmul_use_avx2(pass == 0);
    if (pass == 0 && !avx2) GTEST_SKIP() << "this CPU has no AVX2: only the SSE2 path exists";
    std::vector<float> out(N * OUT), dx(N * IN, 0.5f), dw(IN * OUT, 0.25f), db(OUT, 0.f);
    ops::matmul_forward(out.data(), x.data(), w.data(), b.data(), N, IN, OUT);
    ops::matmul_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), N, IN,
                         OUT);
    results[pass] = {out, dx, dw, db};
  }
  ops::matmul_use_avx2(true);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(0, std::memcmp(results[0][k].data(), results[1][k].data(),
                             results[0][k].size() * sizeof(float)))
        << "output " << k;
}

TEST(OpsGradcheck, DeterministicExpWithinTwoUlp) {
  // Against double-precision exp over the whole range the kernels use.
  double worst_ulps = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 2000000.0f;
    const double want = std::exp(static_cast<double>(x));
    const float got = ops::det_expf(x);
    const double ulp = std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    worst_ulps = std::max(worst_ulps, std::abs(got - want) / ulp);
  }
  EXPECT_LE(worst_ulps, 2.0);
  ::testing::Test::RecordProperty("det_expf_worst_ulps", std::to_string(worst_ulps));
  EXPECT_EQ(ops::det_expf(0.0f), 1.0f);
  EXPECT_EQ(ops::det_expf(-100.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(ops::det_expf(1000.0f)));
}

TEST(OpsGradcheck, LayerNorm) {
  std::mt19937_64 rng(2);
  const int N = 3, C = 8;
  Vec x = random_vec(N * C, rng), w = random_vec(C, rng), b = random_vec(C, rng);
  const Vec R = random_vec(N * C, rng);
  Vec out(N * C), mean(N), rstd(N);
  auto objective = [&] {
    ops::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                           C);
    return dot(out, R);
  };
  objective();
  Vec dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  ops::layernorm_backward(dx.data(), dw.data(), db.data(), R.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  expect_grad_matches(x, dx, objective, "layernorm.dinp");
  expect_grad_matches(w, dw, objective, "layernorm.dweight");
  expect_grad_matches(b, db, objective, "layernorm.dbias");
}

TEST(OpsGradcheck, LayerNormHandComputed) {
  // x = [1, 3]: mean 2, var 1, rstd = 1/sqrt(1 + 1e-5); weight 1, bias 0 -> [-rstd, rstd].
  const double x[] = {1, 3}, w[] = {1, 1}, b[] = {0, 0};
  double out[2], mean[1], rstd[1];
  ops::layernorm_forward(out, mean, rstd, x, w, b, 1, 2);
  EXPECT_DOUBLE_EQ(mean[0], 2.0);
  EXPECT_NEAR(out[1], 1.0 / std::sqrt(1.0 + 1e-5), 1e-15);
  EXPECT_NEAR(out[0], -out[1], 1e-15);
}

TEST(OpsGradcheck, Attention) {
  std::mt19937_64 rng(3);
  const int B = 2, T = 4, C = 6, NH = 2;
  Vec qkv = random_vec(B * T * 3 * C, rng);
  const Vec R = random_vec(B * T * C, rng);
  Vec out(B * T * C), att(B * NH * T * T);
  auto objective = [&] {
    ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    return dot(out, R);
  };
  objective();
  Vec dqkv(qkv.size(), 0.0);
  ops::attention_backward(dqkv.data(), R.data(), qkv.data(), att.data(), B, T, C, NH);
  expect_grad_matches(qkv, dqkv, objective, "attention.dqkv");
}

TEST(OpsGradcheck, AttentionIsCausalAndRowsSumToOne) {
  std::mt19937_64 rng(4);
  const int B = 1, T = 5, C = 4, NH = 2;
  Vec qkv = random_vec(B * T * 3 * C, rng);
  Vec out(B * T * C), att(B * NH * T * T);
  ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int h = 0; h < NH; ++h)
    for (int t = 0; t < T; ++t) {
      double sum = 0;
      for (int t2 = 0; t2 < T; ++t2) {
        const double a = att[(h * T + t) * T + t2];
        if (t2 > t) {
          EXPECT_EQ(a, 0.0);
        }
        sum += a;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  // The first position attends only to itself: its output is its own v.
  for (int i = 0; i < C; ++i) EXPECT_NEAR(out[i], qkv[2 * C + i], 1e-12);
  // Changing the last token must not change any earlier output.
  const Vec before = out;
  for (int i = 0; i < 3 * C; ++i) qkv[(T - 1) * 3 * C + i] += 1.0;
  ops::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
  for (int i = 0; i < (T - 1) * C; ++i) EXPECT_EQ(out[i], before[i]);
}

TEST(OpsGradcheck, Gelu) {
  std::mt19937_64 rng(5);
  const std::size_t n = 20;
  Vec x = random_vec(n, rng, 3.0);
  const Vec R = random_vec(n, rng);
  Vec out(n);
  auto objective = [&] {
    ops::gelu_forward(out.data(), x.data(), n);
    return dot(out, R);
  };
  Vec dx(n, 0.0);
  ops::gelu_backward(dx.data(), x.data(), R.data(), n);
  expect_grad_matches(x, dx, objective, "gelu.dinp");
  // gelu_tanh(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906082768
  const double one = 1.0;
  double g;
  ops::gelu_forward(&g, &one, 1);
  EXPECT_NEAR(g, 0.8411919906082768, 1e-15);
}

TEST(OpsGradcheck, Residual) {
  std::mt19937_64 rng(6);
  const std::size_t n = 9;
  Vec a = random_vec(n, rng), b = random_vec(n, rng);
  const Vec R = random_vec(n, rng);
  Vec out(n);
  auto objective = [&] {
    ops::residual_forward(out.data(), a.data(), b.data(), n);
    return dot(out, R);
  };
  Vec da(n, 0.0), db(n, 0.0);
  ops::residual_backward(da.data(), db.data(), R.data(), n);
  expect_grad_matches(a, da, objective, "residual.da");
  expect_grad_matches(b, db, objective, "residual.db");
}

TEST(OpsGradcheck, Embedding) {
  std::mt19937_64 rng(7);
  const int B = 2, T = 3, C = 4, V = 5;
  const std::vector<std::int32_t> tokens = {0, 4, 4, 2, 0, 1};  // repeats: grads must add up
  Vec wte = random_vec(V * C, rng), wpe = random_vec(T * C, rng);
  const Vec R = random_vec(B * T * C, rng);
  Vec out(B * T * C);
  auto objective = [&] {
    ops::embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, R);
  };
  Vec dwte(V * C, 0.0), dwpe(T * C, 0.0);
  ops::embedding_backward(dwte.data(), dwpe.data(), R.data(), tokens.data(), B, T, C);
  expect_grad_matches(wte, dwte, objective, "embedding.dwte");
  expect_grad_matches(wpe, dwpe, objective, "embedding.dwpe");
  for (int c = 0; c < C; ++c) EXPECT_EQ(dwte[3 * C + c], 0.0);  // token 3 never appears
}

TEST(OpsGradcheck, CrossEntropy) {
  std::mt19937_64 rng(8);
  const int N = 3, V = 7;
  Vec logits = random_vec(N * V, rng, 4.0);
  const std::vector<std::int32_t> targets = {6, 0, 3};
  const double dloss = 0.37;
  Vec losses(N), probs(N * V);
  auto objective = [&] {
    ops::cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, V);
    double s = 0;
    for (double l : losses) s += l;
    return s * dloss;
  };
  objective();
  Vec dlogits(N * V, 0.0);
  ops::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), dloss, N, V);
  expect_grad_matches(logits, dlogits, objective, "cross_entropy.dlogits");
  // Uniform logits over V classes: loss = log V.
  const double zeros[4] = {0, 0, 0, 0};
  const std::int32_t t0 = 2;
  double l, p[4];
  ops::cross_entropy_forward(&l, p, zeros, &t0, 1, 4);
  EXPECT_NEAR(l, std::log(4.0), 1e-15);
}

TEST(OpsGradcheck, FloatMatchesDoubleReference) {
  // The float kernels (what the model runs) agree with the double instantiation to float
  // rounding: relative 1e-5 on O(1) values.
  std::mt19937_64 rng(9);
  const int B = 2, T = 8, C = 16, NH = 4, N = B * T;
  const Vec qkv = random_vec(N * 3 * C, rng);
  Vec outd(N * C), attd(B * NH * T * T);
  ops::attention_forward(outd.data(), attd.data(), qkv.data(), B, T, C, NH);
  const auto qkvf = to_float(qkv);
  std::vector<float> outf(N * C), attf(B * NH * T * T);
  ops::attention_forward(outf.data(), attf.data(), qkvf.data(), B, T, C, NH);
  for (int i = 0; i < N * C; ++i) EXPECT_NEAR(outf[i], outd[i], 1e-5) << i;

  const Vec x = random_vec(N * C, rng), w = random_vec(C * 3 * C, rng), b = random_vec(3 * C, rng);
  Vec md(N * 3 * C);
  ops::matmul_forward(md.data(), x.data(), w.data(), b.data(), N, C, 3 * C);
  const auto xf = to_float(x), wf = to_float(w), bf = to_float(b);
  std::vector<float> mf(N * 3 * C);
  ops::matmul_forward(mf.data(), xf.data(), wf.data(), bf.data(), N, C, 3 * C);
  for (int i = 0; i < N * 3 * C; ++i) EXPECT_NEAR(mf[i], md[i], 1e-5 * (1 + std::abs(md[i])));
}
