// The per-rank memory model against hand-computed values.
#include <gtest/gtest.h>

#include "planner/memory_model.h"

namespace fp = flotilla::planner;

TEST(MemoryModel, OneFOneBInFlight) {
  EXPECT_EQ(fp::in_flight_micro_batches(0, 4, 8), 4);
  EXPECT_EQ(fp::in_flight_micro_batches(3, 4, 8), 1);
  EXPECT_EQ(fp::in_flight_micro_batches(0, 4, 2), 2);
}

TEST(MemoryModel, StageParamsSumToModel) {
  const auto llama = *fp::find_preset("llama-2-7b");  // untied: stages add up exactly at tp=1
  const int L = llama.num_layers;
  EXPECT_EQ(fp::stage_params_per_rank(llama, 0, 10, 1) + fp::stage_params_per_rank(llama, 10, L + 2, 1),
            fp::total_params(llama));
  const auto gpt = *fp::find_preset("gpt-3-175b");  // tied: the last stage keeps its own head copy
  EXPECT_EQ(fp::stage_params_per_rank(gpt, 0, 50, 1) + fp::stage_params_per_rank(gpt, 50, gpt.num_layers + 2, 1),
            fp::total_params(gpt) + fp::head_matrix_params(gpt));
  EXPECT_EQ(fp::stage_params_per_rank(gpt, 0, gpt.num_layers + 2, 1), fp::total_params(gpt));
}

TEST(MemoryModel, KorthikantiActivations) {
  auto m = *fp::find_preset("gpt-3-175b");
  m.seq_len = 2048;
  const double s = 2048, b = 1, h = 12288, a = 96;
  fp::TrainingOptions o;
  // t=1, no SP: sbh(34 + 5as/h)
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 1, 1, o), s * b * h * (34 + 5 * a * s / h), 1.0);
  // t=8: sbh(10 + 24/8 + 5as/(8h))
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 8, 1, o), s * b * h * (10 + 3 + 5 * a * s / (8 * h)), 1.0);
  o.sequence_parallel = true;
  o.recompute = fp::Recompute::kSelective;  // sbh * 34 / t
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 8, 1, o), s * b * h * 34 / 8, 1.0);
  o.recompute = fp::Recompute::kFull;  // only the layer input, 2 sbh / t with SP
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 8, 1, o), 2 * s * b * h / 8, 1.0);
}

TEST(MemoryModel, StaticBytesAndZero) {
  const auto m = *fp::find_preset("llama-2-7b");
  fp::StageShape shape{0, m.num_blocks(), 1, 8, 1, 1, {}};
  const auto z0 = fp::stage_memory(m, shape);
  const double p = static_cast<double>(fp::total_params(m));
  EXPECT_EQ(z0.weights_bytes, static_cast<std::int64_t>(2 * p));
  EXPECT_EQ(z0.grads_bytes, static_cast<std::int64_t>(4 * p));
  EXPECT_EQ(z0.optimizer_bytes, static_cast<std::int64_t>(12 * p));
  shape.options.zero_stage = 1;
  EXPECT_EQ(fp::stage_memory(m, shape).optimizer_bytes, static_cast<std::int64_t>(12 * p / 8));
  shape.options.zero_stage = 3;
  const auto z3 = fp::stage_memory(m, shape);
  EXPECT_EQ(z3.weights_bytes, static_cast<std::int64_t>(2 * p / 8));
  EXPECT_EQ(z3.grads_bytes, static_cast<std::int64_t>(4 * p / 8));
  // More in-flight micro-batches cost exactly their activations.
  fp::StageShape a{1, 9, 1, 1, 2, 1, {}};
  fp::StageShape b = a;
  b.in_flight_micro_batches = 3;
  EXPECT_EQ(fp::stage_memory(m, b).activations_bytes, 3 * fp::stage_memory(m, a).activations_bytes);
}
