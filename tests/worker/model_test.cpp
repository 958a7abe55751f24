// Model-level tests on the CPU backend: partition-free init and math (bit-for-bit), whole-model
// gradients against finite differences, AdamW and the LR schedule against hand-computed
// values, and training the small model on a text file lowers the loss.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "worker/model/backend.h"
#include "worker/model/config.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/unit.h"

namespace fw = flotilla::worker;

namespace {

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A deterministic byte stream: the repo README repeated (real English text, no data files).
std::vector<std::int32_t> text_tokens() {
  std::ifstream in(std::string(FLOTILLA_SOURCE_DIR) + "/README.md", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() < 2000) text += "the quick brown fox jumps over the lazy dog. ";
  while (text.size() < 20000) text += text;
  // Bytes are token ids 0..255: read them unsigned (the README holds UTF-8 such as "λ").
  std::vector<std::int32_t> ids;
  for (unsigned char byte : text) ids.push_back(byte);
  return ids;
}

struct Batch {
  std::vector<std::int32_t> tokens, targets;
  fw::MicroBatch view(int B) const { return {B, tokens.data(), targets.data()}; }
};

Batch make_batch(const std::vector<std::int32_t>& stream, int B, int T, std::size_t start) {
  Batch b;
  for (int s = 0; s < B; ++s) {
    const std::size_t off = (start + static_cast<std::size_t>(s) * 997) % (stream.size() - T - 1);
    for (int t = 0; t < T; ++t) {
      b.tokens.push_back(stream[off + t]);
      b.targets.push_back(stream[off + t + 1]);
    }
  }
  return b;
}

// Runs forward+backward of one micro-batch through a chain of stages; returns the loss.
float step_through(std::vector<std::unique_ptr<fw::Stage>>& stages, const fw::MicroBatch& mb, std::uint64_t id,
                   float dloss) {
  std::vector<float> act;
  float loss = 0;
  for (auto& s : stages) act = s->forward(id, mb, act, &loss);
  std::vector<float> grad;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) grad = (*it)->backward(id, grad, dloss);
  return loss;
}

std::vector<std::unique_ptr<fw::Stage>> make_stages(const fw::GPTConfig& c, const std::vector<int>& bounds,
                                                    std::uint64_t seed, fw::Backend& be) {
  std::vector<std::unique_ptr<fw::Stage>> out;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i)
    out.push_back(std::make_unique<fw::Stage>(c, bounds[i], bounds[i + 1], seed, be));
  return out;
}

}  // namespace

TEST(ModelConfig, PresetsAndValidation) {
  const auto small = fw::gpt_preset("small");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->num_units(), small->num_layers + 2);
  EXPECT_EQ(fw::validate(*small), "");
  EXPECT_FALSE(fw::gpt_preset("huge"));
  fw::GPTConfig bad = *small;
  bad.heads = 3;
  EXPECT_NE(fw::validate(bad).find("divisible"), std::string::npos);
  // GPT-2 small shape, 32000-token vocabulary, untied head: blocks 12 * (12*768^2 + 13*768) =
  // 85,054,464; embeddings 32000*768 + 1024*768 = 25,362,432; head 2*768 + 768*32000 =
  // 24,577,536.
  EXPECT_EQ(fw::gpt_preset("gpt-125m")->parameter_count(), 134994432u);
}

TEST(ModelConfig, LearningRateScheduleHandComputed) {
  fw::TrainConfig t;
  t.lr = 1e-3f;
  t.min_lr_ratio = 0.1f;
  t.warmup_steps = 10;
  t.total_steps = 110;
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 0), 1e-4f);     // 1e-3 * 1/10
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 9), 1e-3f);     // end of warm-up
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 10), 1e-3f);    // cosine starts at the peak
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 60), 5.5e-4f);  // halfway: (1e-3 + 1e-4) / 2
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 110), 1e-4f);   // floor
  EXPECT_FLOAT_EQ(fw::learning_rate(t, 500), 1e-4f);
}

TEST(ModelOptimizer, AdamWFirstStepHandComputed) {
  // Step t=1: m = 0.1 g, v = 0.05 g^2 (beta 0.9/0.95), mhat = g, vhat = g^2, so the update is
  // lr * (g / (|g| + eps) + wd * p) = lr * (sign(g) + wd * p) up to eps.
  float p[2] = {1.0f, 1.0f};
  const float g[2] = {0.5f, -2.0f};
  float m[2] = {}, v[2] = {};
  const std::uint8_t mask[2] = {1, 0};
  fw::adamw_cpu(p, g, m, v, mask, 2, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 1);
  EXPECT_NEAR(p[0], 1.0f - 0.01f * (1.0f + 0.1f), 1e-6);
  EXPECT_NEAR(p[1], 1.0f + 0.01f, 1e-6);
  EXPECT_FLOAT_EQ(m[0], 0.05f);
  EXPECT_FLOAT_EQ(v[1], 0.05f * 4.0f);
}

TEST(ModelOptimizer, ClipScale) {
  const std::vector<double> per_unit = {9.0, 16.0};  // norm 5
  EXPECT_DOUBLE_EQ(fw::grad_norm(per_unit), 5.0);
  EXPECT_NEAR(fw::clip_scale(5.0, 1.0f), 0.2f, 1e-6);
  EXPECT_EQ(fw::clip_scale(0.5, 1.0f), 1.0f);
  EXPECT_EQ(fw::clip_scale(5.0, 0.0f), 1.0f);  // disabled
}

TEST(ModelUnits, InitDependsOnlyOnSeedAndUnitIndex) {
  const auto c = *fw::gpt_preset("tiny");
  for (int u = 0; u < c.num_units(); ++u) {
    EXPECT_TRUE(bit_equal(fw::init_unit_params(c, u, 7), fw::init_unit_params(c, u, 7)));
  }
  EXPECT_FALSE(bit_equal(fw::init_unit_params(c, 1, 7), fw::init_unit_params(c, 2, 7)));
  EXPECT_FALSE(bit_equal(fw::init_unit_params(c, 1, 7), fw::init_unit_params(c, 1, 8)));
  // Init statistics: matrices ~N(0, 0.02); LN weights 1; biases 0.
  const auto layout = fw::unit_param_layout(c, 1);
  const auto p = fw::init_unit_params(c, 1, 7);
  for (const auto& t : layout) {
    if (t.name == "ln1.weight") {
      EXPECT_EQ(p[t.offset], 1.0f);
    }
    if (t.name == "qkv.bias") {
      EXPECT_EQ(p[t.offset], 0.0f);
    }
    if (t.name == "qkv.weight") {
      double ss = 0;
      for (std::size_t i = 0; i < t.count; ++i) ss += double(p[t.offset + i]) * p[t.offset + i];
      EXPECT_NEAR(std::sqrt(ss / t.count), 0.02, 0.002);
    }
  }
}

TEST(ModelStages, AnyPartitionIsBitIdentical) {
  const auto c = *fw::gpt_preset("tiny");  // 4 units
  auto be = fw::make_cpu_backend();
  const auto stream = text_tokens();
  const std::vector<std::vector<int>> partitions = {{0, 4}, {0, 1, 4}, {0, 2, 3, 4}, {0, 1, 2, 3, 4}};
  std::vector<float> ref_losses;
  std::vector<std::vector<float>> ref_grads;
  for (const auto& bounds : partitions) {
    auto stages = make_stages(c, bounds, 42, *be);
    std::vector<float> losses;
    // Two micro-batches in flight before backward, as in 1F1B.
    const Batch b0 = make_batch(stream, 2, c.seq_len, 0), b1 = make_batch(stream, 2, c.seq_len, 500);
    std::vector<float> a0, a1;
    float l0 = 0, l1 = 0;
    for (auto& s : stages) a0 = s->forward(0, b0.view(2), a0, &l0);
    for (auto& s : stages) a1 = s->forward(1, b1.view(2), a1, &l1);
    std::vector<float> g0, g1;
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) g0 = (*it)->backward(0, g0, 0.5f);
    for (auto it = stages.rbegin(); it != stages.rend(); ++it) g1 = (*it)->backward(1, g1, 0.5f);
    losses = {l0, l1};
    std::vector<std::vector<float>> grads;
    for (auto& s : stages)
      for (auto& u : s->units()) {
        grads.emplace_back();
        u.get_grads(&grads.back());
      }
    if (ref_losses.empty()) {
      ref_losses = losses;
      ref_grads = grads;
      continue;
    }
    EXPECT_TRUE(bit_equal(losses, ref_losses)) << "partition with " << bounds.size() - 1 << " stages";
    ASSERT_EQ(grads.size(), ref_grads.size());
    for (std::size_t u = 0; u < grads.size(); ++u) EXPECT_TRUE(bit_equal(grads[u], ref_grads[u])) << "unit " << u;
  }
  // Untrained byte model: loss near ln(256) = 5.545.
  EXPECT_NEAR(ref_losses[0], std::log(256.0), 0.1);
}

TEST(ModelStages, WholeModelGradientMatchesFiniteDifferences) {
  // Float model, central differences with h = 1e-2 on the parameters with the largest
  // gradients of every tensor; float rounding in the loss (~1e-7 relative) divided by 2h gives
  // ~3e-5 absolute noise, so we accept 5% relative or 2e-4 absolute.
  fw::GPTConfig c{.num_layers = 1, .hidden = 8, .heads = 2, .seq_len = 6, .vocab = 16};
  auto be = fw::make_cpu_backend();
  const std::vector<std::int32_t> stream = {1, 5, 9, 3, 3, 7, 2, 11, 15, 0, 4, 8, 12, 6, 1, 2, 3};
  const Batch b = make_batch(stream, 2, c.seq_len, 0);
  fw::Stage stage(c, 0, c.num_units(), 3, *be);
  std::vector<float> none;
  float loss = 0;
  stage.forward(0, b.view(2), none, &loss);
  stage.backward(0, none, 1.0f);
  for (auto& unit : stage.units()) {
    std::vector<float> grads, params, m, v;
    unit.get_grads(&grads);
    unit.get_state(&params, &m, &v);
    for (const auto& t : fw::unit_param_layout(c, unit.index())) {
      // Probe the 3 largest-gradient entries of this tensor.
      std::vector<std::size_t> idx(t.count);
      for (std::size_t i = 0; i < t.count; ++i) idx[i] = t.offset + i;
      std::partial_sort(idx.begin(), idx.begin() + std::min<std::size_t>(3, idx.size()), idx.end(),
                        [&](auto a, auto bb) { return std::abs(grads[a]) > std::abs(grads[bb]); });
      for (std::size_t k = 0; k < std::min<std::size_t>(3, idx.size()); ++k) {
        const std::size_t i = idx[k];
        const float h = 1e-2f, saved = params[i];
        auto eval = [&](float value) {
          params[i] = value;
          unit.set_state(params, m, v);
          float l = 0;
          stage.forward(1, b.view(2), none, &l);
          stage.discard(1);
          return static_cast<double>(l);
        };
        const double numeric = (eval(saved + h) - eval(saved - h)) / (2.0 * h);
        eval(saved);
        EXPECT_NEAR(grads[i], numeric, std::max(2e-4, 0.05 * std::abs(numeric)))
            << fw::unit_name(c, unit.index()) << "." << t.name << "[" << i - t.offset << "]";
      }
    }
  }
}

TEST(ModelTraining, SmallModelLossDecreasesOnText) {
  const auto c = *fw::gpt_preset("small");
  auto be = fw::make_cpu_backend();
  const auto stream = text_tokens();
  fw::TrainConfig train;
  train.lr = 3e-3f;
  train.warmup_steps = 5;
  train.total_steps = 40;
  auto stages = make_stages(c, {0, c.num_units()}, train.seed, *be);
  const int B = 4, steps = 40;
  std::vector<float> losses;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    for (auto& s : stages) s->zero_grads();
    const Batch b = make_batch(stream, B, c.seq_len, static_cast<std::size_t>(step) * 4093);
    losses.push_back(step_through(stages, b.view(B), 0, 1.0f));
    std::vector<double> sumsq;
    for (auto& s : stages)
      for (double x : s->grad_sum_squares()) sumsq.push_back(x);
    const float scale = fw::clip_scale(fw::grad_norm(sumsq), train.grad_clip_norm);
    for (auto& s : stages) s->adamw_step(train, step, scale);
  }
  const double ms_per_step =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
  RecordProperty("small_ms_per_step_B4", std::to_string(ms_per_step));
  std::printf("small model, B=4 x T=%d: %.1f ms/step; loss %.3f -> %.3f\n", c.seq_len, ms_per_step, losses.front(),
              losses.back());
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += losses[i] / 5, last += losses[steps - 5 + i] / 5;
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.1);
  // Byte-level English text: character unigram entropy is ~3 nats, far below ln 256 = 5.55; the model must
  // get under 3.5 nats/byte within 40 steps.
  EXPECT_LT(last, 3.5) << "loss did not drop enough: first " << first << " last " << last;
  EXPECT_LT(last, first - 1.5);
}

TEST(ModelStages, BadInputsSayWhatIsWrong) {
  const auto c = *fw::gpt_preset("tiny");
  auto be = fw::make_cpu_backend();
  auto expect_error = [](auto&& fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { fw::Stage(c, 2, 2, 1, *be); }, "empty or outside");
  expect_error([&] { fw::Stage(c, 0, c.num_units() + 1, 1, *be); }, "empty or outside");
  fw::GPTConfig bad = c;
  bad.heads = 3;
  expect_error([&] { fw::Stage(bad, 0, 1, 1, *be); }, "divisible");

  fw::Stage middle(c, 1, 2, 1, *be);
  std::vector<std::int32_t> tokens(c.seq_len, 1), targets(c.seq_len, 1);
  const fw::MicroBatch mb{1, tokens.data(), targets.data()};
  std::vector<float> wrong(7);
  expect_error([&] { middle.forward(0, mb, wrong, nullptr); }, "expected");
  expect_error([&] { middle.backward(9, {}, 1.0f); }, "not in flight");

  fw::Stage first(c, 0, 1, 1, *be);
  tokens[3] = 256;
  expect_error([&] { first.forward(0, mb, {}, nullptr); }, "outside the vocabulary");
  tokens[3] = 1;
  first.forward(0, mb, {}, nullptr);
  expect_error([&] { first.forward(0, mb, {}, nullptr); }, "already in flight");
}
