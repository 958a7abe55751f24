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

// Op-level runtime (Aceso's Megatron fork) with an unfused fp32 softmax, hand-counted per op
// for GPT (ffn = 4h), t-way TP, no SP. Per attention-score element: score op output 2, fp32
// probabilities 4, softmax op fp16 output 2, dropout mask 1, dropout output 2 = 11 B.
// Per s*b*h: replicated LN1 in 2, dense out 2, residual dropout 3, LN2 in 2, GEMM2 out 2,
// residual dropout 3 = 14; split Q,K,V 6, context 2, GEMM1 out 8, GeLU out 8 = 24 (/t).
// Aceso's own op profile (t=1, s=2048, h=1024, a=16, b=1) lists 38 sbh + 448 MiB of scores,
// i.e. 7 B per score with its fused softmax.
TEST(MemoryModel, OpLevelRuntimeActivations) {
  fp::TrainingOptions o;
  EXPECT_EQ(fp::attention_score_bytes_per_element(o), 5);
  o.fused_softmax = false;
  EXPECT_EQ(fp::attention_score_bytes_per_element(o), 7);
  o.op_level_activations = true;
  EXPECT_EQ(fp::attention_score_bytes_per_element(o), 11);
  o.fused_softmax = true;
  EXPECT_EQ(fp::attention_score_bytes_per_element(o), 7);

  auto m = *fp::find_preset("gpt-3-175b");
  m.seq_len = 2048;
  m.hidden = 1024;
  m.heads = 16;
  m.head_dim = 64;
  m.ffn_hidden = 4096;
  const double s = 2048, h = 1024, a = 16;
  o.fused_softmax = false;
  // OPT-350M's shape at t=4, b=1: 226,492,416 B (= 216 MiB; the megatron-runs hold ~206-211).
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 4, 1, o), s * h * (14 + 24.0 / 4) + 11 * a * s * s / 4, 1.0);
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 4, 1, o), 226492416.0, 1.0);
  o.op_level_activations = false;
  o.fused_softmax = true;  // the same shape in fused Megatron: Korthikanti's 112 MiB
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 4, 1, o), s * h * (10 + 24.0 / 4) + 5 * a * s * s / 4, 1.0);
}

// A layer split by an op partition: its two fragments add up to the whole layer, in
// activations (op-level layout) and in parameters, and a stage holding a fragment counts it.
TEST(MemoryModel, OpFragmentsAddUpToTheLayer) {
  const auto m = *fp::find_preset("gpt-3-175b");
  fp::TrainingOptions o;
  o.op_level_activations = true;
  o.fused_softmax = false;
  for (int cut = 0; cut <= fp::kOpsPerLayer; ++cut) {
    EXPECT_NEAR(fp::layer_ops_activation_bytes(m, 0, cut, 8, 2, o) +
                    fp::layer_ops_activation_bytes(m, cut, fp::kOpsPerLayer, 8, 2, o),
                fp::block_activation_bytes(m, 1, 8, 2, o), 2.0);
    EXPECT_EQ(fp::layer_ops_params_per_rank(m, 0, cut, 8) + fp::layer_ops_params_per_rank(m, cut, fp::kOpsPerLayer, 8),
              fp::stage_params_per_rank(m, 1, 2, 8));
  }
  fp::StageShape whole{1, 3, 8, 1, 2, 3, o};   // layers 1 and 2
  fp::StageShape split{1, 2, 8, 1, 2, 3, o};   // layer 1 and the first 6 ops of layer 2
  split.head_ops_of_next_layer = 6;
  const auto w = fp::stage_memory(m, whole);
  const auto p = fp::stage_memory(m, split);
  EXPECT_EQ(w.activations_bytes - p.activations_bytes, 3 * fp::layer_ops_activation_bytes(m, 6, 13, 8, 2, o));
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
