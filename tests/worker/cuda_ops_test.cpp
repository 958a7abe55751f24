// The CUDA backend against the CPU reference, op by op and for whole model steps. Skips when
// no GPU is visible (the suite must pass on CPU-only machines).
// Tolerance (stated once): with FP32 cuBLAS (pedantic math, no TF32) and O(1) inputs, every
// output element must satisfy |gpu - cpu| <= 1e-4 * (1 + |cpu|): float rounding of sums of up
// to a few thousand terms in a different order stays well inside that; a wrong index or a
// missing term does not. Whole-model grads: per-unit relative L2 error < 1e-3 (errors compound
// through layers). TF32 is not compared (10-bit mantissa).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "worker/model/backend.h"
#include "worker/model/config.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/stage.h"

namespace fw = flotilla::worker;
using HostVec = std::vector<float>;

namespace {

std::unique_ptr<fw::Backend> gpu_or_skip(std::string* why) {
  if (!fw::cuda_compiled()) {
    *why = "built without CUDA";
    return nullptr;
  }
  if (fw::cuda_device_count() == 0) {
    *why = "no CUDA device visible on this machine";
    return nullptr;
  }
  return fw::make_backend("cuda", why);
}

#define REQUIRE_GPU(var)                                   \
  std::string why_skip;                                    \
  auto var = gpu_or_skip(&why_skip);                       \
  if (!var) GTEST_SKIP() << "CUDA vs CPU test skipped: " << why_skip

HostVec random_vec(std::size_t n, std::uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  HostVec v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Device mirror of host vectors on one backend.
class Arena {
 public:
  explicit Arena(fw::Backend& be) : be_(be) {}
  float* up(const HostVec& h) {
    bufs_.emplace_back(be_, h.size());
    be_.copy_from_host(bufs_.back().data(), h.data(), h.size() * sizeof(float));
    return bufs_.back().data();
  }
  std::int32_t* up_ints(const std::vector<std::int32_t>& h) {
    ints_.emplace_back(be_, h.size());
    be_.copy_from_host(ints_.back().data(), h.data(), h.size() * sizeof(std::int32_t));
    return ints_.back().data();
  }
  float* zeros(std::size_t n) { return up(HostVec(n, 0.f)); }
  HostVec down(const float* p, std::size_t n) {
    HostVec h(n);
    be_.copy_to_host(h.data(), p, n * sizeof(float));
    return h;
  }

 private:
  fw::Backend& be_;
  std::vector<fw::DeviceBuffer<float>> bufs_;
  std::vector<fw::DeviceBuffer<std::int32_t>> ints_;
};

void expect_close(const HostVec& gpu, const HostVec& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    ASSERT_LE(std::abs(gpu[i] - cpu[i]), 1e-4f * (1.f + std::abs(cpu[i])))
        << what << "[" << i << "] gpu " << gpu[i] << " cpu " << cpu[i];
}

// Runs `op` on both backends; `op` returns the outputs to compare (host copies).
template <class Op>
void compare(fw::Backend& gpu, const char* what, Op op) {
  auto cpu = fw::make_cpu_backend();
  Arena a_cpu(*cpu), a_gpu(gpu);
  const std::vector<HostVec> want = op(*cpu, a_cpu);
  const std::vector<HostVec> got = op(gpu, a_gpu);
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t k = 0; k < want.size(); ++k)
    expect_close(got[k], want[k], (std::string(what) + " output " + std::to_string(k)).c_str());
}

}  // namespace

TEST(CudaOps, Embedding) {
  REQUIRE_GPU(gpu);
  const int B = 3, T = 17, C = 40, V = 300;
  std::vector<std::int32_t> tokens(B * T);
  for (int i = 0; i < B * T; ++i) tokens[i] = (i * 37 + 5) % 11 * 23 % V;  // repeated ids
  const HostVec wte = random_vec(V * C, 1), wpe = random_vec(T * C, 2), dout = random_vec(B * T * C, 3);
  compare(*gpu, "embedding", [&](fw::Backend& be, Arena& a) {
    float* out = a.zeros(B * T * C);
    float* dwte = a.up(random_vec(V * C, 4));  // accumulate onto existing values
    float* dwpe = a.zeros(T * C);
    const std::int32_t* tok = a.up_ints(tokens);
    be.embedding_forward(out, tok, a.up(wte), a.up(wpe), B, T, C);
    be.embedding_backward(dwte, dwpe, a.up(dout), tok, B, T, C, V);
    return std::vector<HostVec>{a.down(out, B * T * C), a.down(dwte, V * C), a.down(dwpe, T * C)};
  });
}

TEST(CudaOps, LayerNorm) {
  REQUIRE_GPU(gpu);
  const int N = 300, C = 96;
  const HostVec x = random_vec(N * C, 5, 2.f), w = random_vec(C, 6), b = random_vec(C, 7),
                dout = random_vec(N * C, 8);
  compare(*gpu, "layernorm", [&](fw::Backend& be, Arena& a) {
    float *out = a.zeros(N * C), *mean = a.zeros(N), *rstd = a.zeros(N);
    float *dx = a.zeros(N * C), *dw = a.zeros(C), *db = a.zeros(C);
    const float *px = a.up(x), *pw = a.up(w);
    be.layernorm_forward(out, mean, rstd, px, pw, a.up(b), N, C);
    be.layernorm_backward(dx, dw, db, a.up(dout), px, pw, mean, rstd, N, C);
    return std::vector<HostVec>{a.down(out, N * C), a.down(dx, N * C), a.down(dw, C),
                                a.down(db, C)};
  });
}

TEST(CudaOps, MatmulWithAndWithoutBias) {
  REQUIRE_GPU(gpu);
  const int N = 130, IN = 72, OUT = 200;
  const HostVec x = random_vec(N * IN, 9), w = random_vec(IN * OUT, 10, 0.2f),
                b = random_vec(OUT, 11), dout = random_vec(N * OUT, 12);
  for (bool with_bias : {true, false}) {
    compare(*gpu, with_bias ? "matmul+bias" : "matmul", [&](fw::Backend& be, Arena& a) {
      float *out = a.zeros(N * OUT), *dx = a.up(random_vec(N * IN, 13)), *dw = a.zeros(IN * OUT),
            *db = a.zeros(OUT);
      const float *px = a.up(x), *pw = a.up(w);
      be.matmul_forward(out, px, pw, with_bias ? a.up(b) : nullptr, N, IN, OUT);
      be.matmul_backward(dx, dw, with_bias ? db : nullptr, a.up(dout), px, pw, N, IN, OUT);
      return std::vector<HostVec>{a.down(out, N * OUT), a.down(dx, N * IN), a.down(dw, IN * OUT),
                                  a.down(db, OUT)};
    });
  }
}

TEST(CudaOps, Attention) {
  REQUIRE_GPU(gpu);
  const int B = 2, T = 70, C = 64, NH = 4;
  const HostVec qkv = random_vec(B * T * 3 * C, 14), dout = random_vec(B * T * C, 15);
  compare(*gpu, "attention", [&](fw::Backend& be, Arena& a) {
    float *out = a.zeros(B * T * C), *att = a.zeros(B * NH * T * T), *dqkv = a.zeros(B * T * 3 * C);
    const float* pq = a.up(qkv);
    be.attention_forward(out, att, pq, B, T, C, NH);
    be.attention_backward(dqkv, a.up(dout), pq, att, B, T, C, NH);
    return std::vector<HostVec>{a.down(out, B * T * C), a.down(att, B * NH * T * T),
                                a.down(dqkv, B * T * 3 * C)};
  });
}

TEST(CudaOps, GeluResidualAccumulate) {
  REQUIRE_GPU(gpu);
  const std::size_t n = 5000;
  const HostVec x = random_vec(n, 16, 4.f), y = random_vec(n, 17), d = random_vec(n, 18);
  compare(*gpu, "elementwise", [&](fw::Backend& be, Arena& a) {
    float *g = a.zeros(n), *dg = a.up(y), *r = a.zeros(n), *da = a.zeros(n), *db = a.up(x),
          *acc = a.up(d);
    const float *px = a.up(x), *py = a.up(y), *pd = a.up(d);
    be.gelu_forward(g, px, n);
    be.gelu_backward(dg, px, pd, n);
    be.residual_forward(r, px, py, n);
    be.residual_backward(da, db, pd, n);
    be.accumulate(acc, px, n);
    return std::vector<HostVec>{a.down(g, n), a.down(dg, n), a.down(r, n), a.down(da, n),
                                a.down(db, n), a.down(acc, n)};
  });
}

TEST(CudaOps, CrossEntropy) {
  REQUIRE_GPU(gpu);
  const int N = 50, V = 1000;
  const HostVec logits = random_vec(N * V, 19, 5.f);
  std::vector<std::int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 131) % V;
  compare(*gpu, "cross_entropy", [&](fw::Backend& be, Arena& a) {
    float *losses = a.zeros(N), *probs = a.zeros(N * V), *dl = a.zeros(N * V);
    const std::int32_t* t = a.up_ints(targets);
    be.cross_entropy_forward(losses, probs, a.up(logits), t, N, V);
    be.cross_entropy_backward(dl, probs, t, 0.25f, N, V);
    return std::vector<HostVec>{a.down(losses, N), a.down(probs, N * V), a.down(dl, N * V)};
  });
}

TEST(CudaOps, SumSquaresAndAdamW) {
  REQUIRE_GPU(gpu);
  const std::size_t n = 100003;
  const HostVec g = random_vec(n, 20), p = random_vec(n, 21), m = random_vec(n, 22, 0.1f);
  HostVec v = random_vec(n, 23, 0.1f);
  for (float& x : v) x = std::abs(x);
  std::vector<std::uint8_t> mask(n);
  for (std::size_t i = 0; i < n; ++i) mask[i] = i % 3 == 0;
  double cpu_ss = 0, gpu_ss = 0;
  compare(*gpu, "adamw", [&](fw::Backend& be, Arena& a) {
    float *pp = a.up(p), *pm = a.up(m), *pv = a.up(v);
    const float* pg = a.up(g);
    fw::DeviceBuffer<std::uint8_t> dmask(be, n);
    be.copy_from_host(dmask.data(), mask.data(), n);
    (be.name() == "cpu" ? cpu_ss : gpu_ss) = be.sum_squares(pg, n);
    be.adamw(pp, pg, pm, pv, dmask.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3);
    return std::vector<HostVec>{a.down(pp, n), a.down(pm, n), a.down(pv, n)};
  });
  EXPECT_NEAR(gpu_ss, cpu_ss, 1e-9 * cpu_ss);  // both accumulate in double
}

// The column sums behind the bias and LayerNorm weight gradients used one gridDim.y block per
// 128 rows, and gridDim.y stops at 65535: more than 8.4 M rows (B*T) failed to launch. Values
// are multiples of 1/8 with small running sums, so every order of summation is exact and the
// bias gradients must match the hand sum exactly.
TEST(CudaOps, ColumnSumsPastTheGridYLimit) {
  REQUIRE_GPU(gpu);
  const int N = 65536 * 128 + 77, C = 2;
  const std::size_t n = static_cast<std::size_t>(N) * C;
  HostVec dout(n), x(n);
  for (std::size_t i = 0; i < n; ++i) {
    dout[i] = 0.125f * static_cast<float>(static_cast<int>(i % 7) - 3);
    x[i] = static_cast<float>(i % 5) - 2.0f + 0.25f * static_cast<float>(i % 2);
  }
  double want_bias[C] = {0, 0};
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < C; ++c) want_bias[c] += dout[static_cast<std::size_t>(r) * C + c];
  Arena a(*gpu);
  // matmul with a 1 x C identity-like weight: only the bias gradient matters here.
  float *dw = a.zeros(C * C), *db = a.zeros(C);
  const float *pdout = a.up(dout), *px = a.up(x), *pw = a.up(HostVec{1, 0, 0, 1});
  gpu->matmul_backward(nullptr, dw, db, pdout, px, pw, N, C, C);
  const HostVec got_db = a.down(db, C);
  for (int c = 0; c < C; ++c) EXPECT_EQ(got_db[c], static_cast<float>(want_bias[c])) << "bias " << c;
  // LayerNorm backward over the same rows: bias grad exact, weight grad against a double sum.
  float *out = a.zeros(n), *mean = a.zeros(N), *rstd = a.zeros(N), *dx = a.zeros(n),
        *lw = a.zeros(C), *lb = a.zeros(C);
  const float *ones = a.up(HostVec(C, 1.f)), *zeros = a.zeros(C);
  gpu->layernorm_forward(out, mean, rstd, px, ones, zeros, N, C);
  gpu->layernorm_backward(dx, lw, lb, pdout, px, ones, mean, rstd, N, C);
  const HostVec got_lb = a.down(lb, C), got_lw = a.down(lw, C), m = a.down(mean, N),
                s = a.down(rstd, N);
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(got_lb[c], static_cast<float>(want_bias[c])) << "ln bias " << c;
    double want = 0, scale = 0;
    for (int r = 0; r < N; ++r) {
      const std::size_t i = static_cast<std::size_t>(r) * C + c;
      const double term = double(dout[i]) * (double(x[i]) - m[r]) * s[r];
      want += term;
      scale += std::abs(term);
    }
    // Float sums of 128 rows, then of 65537 chunk partials in order: first-order rounding is
    // at most (128 + chunks) * 2^-24 of the sum of |terms| (coverage of every row is already
    // proven exactly by the bias sums above, which run in the same chunk loop).
    const double chunks = (N + 127) / 128;
    EXPECT_NEAR(got_lw[c], want, (128 + chunks) * 6e-8 * scale) << "ln weight " << c;
  }
}

TEST(CudaModel, SmallModelStepsMatchCpuAndAreDeterministic) {
  REQUIRE_GPU(gpu);
  auto cpu = fw::make_cpu_backend();
  const auto c = *fw::gpt_preset("small");
  const int B = 4;
  std::vector<std::int32_t> tokens(B * c.seq_len), targets(B * c.seq_len);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::int32_t>((i * 7 + i / 13) % 256);
    targets[i] = static_cast<std::int32_t>((i * 7 + 7 + (i + 1) / 13) % 256);
  }
  const fw::MicroBatch mb{B, tokens.data(), targets.data()};
  fw::TrainConfig train;
  auto run = [&](fw::Backend& be, std::vector<float>* losses, std::vector<HostVec>* grads) {
    fw::Stage stage(c, 0, c.num_units(), train.seed, be);
    for (int step = 0; step < 3; ++step) {
      stage.zero_grads();
      float loss = 0;
      stage.forward(0, mb, {}, &loss);
      stage.backward(0, {}, 1.0f);
      losses->push_back(loss);
      if (step == 0)
        for (auto& u : stage.units()) {
          grads->emplace_back();
          u.get_grads(&grads->back());
        }
      stage.adamw_step(train, step, 1.0f);
    }
  };
  std::vector<float> cpu_losses, gpu_losses, gpu_losses2;
  std::vector<HostVec> cpu_grads, gpu_grads, gpu_grads2;
  run(*cpu, &cpu_losses, &cpu_grads);
  run(*gpu, &gpu_losses, &gpu_grads);
  run(*gpu, &gpu_losses2, &gpu_grads2);
  for (std::size_t s = 0; s < cpu_losses.size(); ++s)
    EXPECT_NEAR(gpu_losses[s], cpu_losses[s], 1e-4 * cpu_losses[s]) << "step " << s;
  for (std::size_t u = 0; u < cpu_grads.size(); ++u) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < cpu_grads[u].size(); ++i) {
      num += std::pow(double(gpu_grads[u][i]) - cpu_grads[u][i], 2);
      den += std::pow(double(cpu_grads[u][i]), 2);
    }
    EXPECT_LT(std::sqrt(num / den), 1e-3) << "unit " << u;
    EXPECT_EQ(0, std::memcmp(gpu_grads[u].data(), gpu_grads2[u].data(),
                             gpu_grads[u].size() * sizeof(float)))
        << "CUDA run-to-run determinism, unit " << u;
  }
  EXPECT_EQ(0, std::memcmp(gpu_losses.data(), gpu_losses2.data(), gpu_losses.size() * sizeof(float)));
}

TEST(CudaBackend, UnavailableBackendSaysWhy) {
  std::string error;
  if (fw::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present; nothing to check";
  EXPECT_EQ(fw::make_backend("cuda", &error), nullptr);
  EXPECT_FALSE(error.empty());
  EXPECT_EQ(fw::make_backend("tpu", &error), nullptr);
  EXPECT_NE(error.find("unknown backend"), std::string::npos);
}
