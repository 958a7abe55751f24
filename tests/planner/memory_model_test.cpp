// The per-rank memory model against hand-computed values.
#include <gtest/gtest.h>

#include "planner/gpu_catalog.h"
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

// FlashAttention, hand-counted for OPT-350M's layer shape (s=2048, h=1024, a=16, ffn=4h) at
// t=2, b=2, fused Megatron: Korthikanti's linear part sbh(10 + 24/t) stays (Q, K, V and the
// attention output are in it); the 5 B per score (softmax out 2, dropout mask 1, dropout out 2)
// of a*s*s*b/t scores go, replaced by the fp32 logsumexp, 4 B per (batch, head, query) / t.
TEST(MemoryModel, FlashAttentionHandCounted) {
  const auto m = *fp::find_preset("opt-350m");
  ASSERT_EQ(m.seq_len, 2048);
  ASSERT_EQ(m.hidden, 1024);
  ASSERT_EQ(m.heads, 16);
  const double s = 2048, h = 1024, a = 16, b = 2, t = 2;
  fp::TrainingOptions o;
  o.flash_attention = true;
  const double linear = s * b * h * (10 + 24 / t);           // 92,274,688 B
  const double lse = 4 * a * s * b / t;                       // 131,072 B
  const double scores = 5 * a * s * s * b / t;                // 335,544,320 B
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 2, 2, o), linear + lse, 1.0);
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 2, 2, o), 92405760.0, 1.0);
  fp::TrainingOptions materialized;
  EXPECT_NEAR(fp::block_activation_bytes(m, 1, 2, 2, materialized) - fp::block_activation_bytes(m, 1, 2, 2, o),
              scores - lse, 2.0);
  // A stage of 4 layers, 3 in flight: the activations differ by exactly 12 layers' scores.
  fp::StageShape shape{1, 5, 2, 1, 2, 3, materialized};
  const auto mat = fp::stage_memory(m, shape);
  shape.options = o;
  const auto flash = fp::stage_memory(m, shape);
  EXPECT_NEAR(static_cast<double>(mat.activations_bytes - flash.activations_bytes), 12 * (scores - lse), 24.0);
  EXPECT_EQ(mat.weights_bytes, flash.weights_bytes);
  // Only on GPUs that run it: V100 (Volta) and T4 (Turing) keep the scores.
  const auto catalog = fp::builtin_gpu_catalog();
  for (const char* yes : {"A100-40", "A100-80", "H100-80", "H200", "GH200-96", "L4", "A10G", "RTX-3090", "RTX-4090"})
    EXPECT_TRUE(catalog.find(yes)->supports_flash_attention) << yes;
  for (const char* no : {"V100-16", "V100-32", "T4", "RTX-2080", "Titan-RTX"})
    EXPECT_FALSE(catalog.find(no)->supports_flash_attention) << no;
  EXPECT_TRUE(fp::options_on_gpu(o, true).flash_attention);
  EXPECT_FALSE(fp::options_on_gpu(o, false).flash_attention);
  EXPECT_FALSE(fp::options_on_gpu(materialized, true).flash_attention);
  auto overridden = fp::apply_catalog_override(catalog, "V100-16: {supports_flash_attention: true}");
  ASSERT_TRUE(overridden) << overridden.error();
  EXPECT_TRUE(overridden->find("V100-16")->supports_flash_attention);
}

// Flash never costs more, for every layout and shape, and its saving is exactly the score bytes
// minus the logsumexp (0 under selective/full recompute, which keep no scores anyway).
TEST(MemoryModel, FlashNeverAboveMaterialized) {
  for (const char* name : {"opt-350m", "gpt-neo-2.7b", "llama-3-8b", "llama-2-70b"}) {
    const auto m = *fp::find_preset(name);
    for (int tp : {1, 2, 8}) {
      for (int mbs : {1, 4}) {
        for (int variant = 0; variant < 16; ++variant) {
          fp::TrainingOptions o;
          o.fused_softmax = variant & 1;
          o.op_level_activations = variant & 2;
          o.sequence_parallel = variant & 4;
          o.recompute = variant & 8 ? fp::Recompute::kSelective : fp::Recompute::kNone;
          fp::TrainingOptions f = o;
          f.flash_attention = true;
          const double scores = static_cast<double>(m.heads) * m.seq_len * m.seq_len * mbs / tp;
          const double lse = 4.0 * m.heads * m.seq_len * mbs / tp;
          const double saved = o.recompute == fp::Recompute::kNone
                                   ? fp::attention_score_bytes_per_element(o) * scores - lse
                                   : 0.0;
          const auto mat = fp::block_activation_bytes(m, 1, tp, mbs, o);
          const auto fl = fp::block_activation_bytes(m, 1, tp, mbs, f);
          EXPECT_LE(fl, mat) << name << " tp " << tp << " variant " << variant;
          EXPECT_NEAR(static_cast<double>(mat - fl), saved, 2.0) << name << " tp " << tp << " variant " << variant;
          if (o.op_level_activations && o.recompute == fp::Recompute::kNone) {
            for (int cut = 0; cut <= fp::kOpsPerLayer; ++cut)  // fragments still add up
              EXPECT_NEAR(fp::layer_ops_activation_bytes(m, 0, cut, tp, mbs, f) +
                              fp::layer_ops_activation_bytes(m, cut, fp::kOpsPerLayer, tp, mbs, f),
                          static_cast<double>(fl), 2.0);
          }
        }
      }
    }
  }
}

// The stage DP's memory rows start each pointer where the row with fewer micro-batches in flight
// left it (planner/stage_dp.cpp, memory_row()): sound only if a stage's peak never falls as more
// micro-batches are in flight. Checked over recompute modes, the reference worker's layout, the
// first block (embedding), the last (head and logits), TP and micro-batch sizes.
TEST(MemoryModel, PeakNeverFallsWithMoreMicroBatchesInFlight) {
  const fp::ModelSpec model = *fp::find_preset("gpt-3-175b");
  const int blocks = model.num_blocks();
  for (const fp::Recompute recompute : {fp::Recompute::kNone, fp::Recompute::kSelective, fp::Recompute::kFull})
    for (const bool reference : {false, true})
      for (const auto& [first, last] : std::vector<std::pair<int, int>>{{0, 5}, {3, 9}, {blocks - 4, blocks}})
        for (const int tp : {1, 8})
          for (const int mbs : {1, 4}) {
            fp::StageShape shape;
            shape.first_block = first;
            shape.last_block = last;
            shape.tp = tp;
            shape.micro_batch_size = mbs;
            shape.options.recompute = recompute;
            shape.options.reference_worker_activations = reference;
            std::int64_t before = 0;
            for (int in_flight = 1; in_flight <= 16; ++in_flight) {
              shape.in_flight_micro_batches = in_flight;
              const std::int64_t peak = fp::stage_memory(model, shape).peak_bytes;
              EXPECT_GE(peak, before) << "blocks [" << first << ", " << last << ") tp " << tp << " mbs " << mbs
                                      << " in flight " << in_flight << " recompute "
                                      << static_cast<int>(recompute) << " reference " << reference;
              before = peak;
            }
          }
}
