// GPTConfig and TrainConfig: the sizes of the reference GPT and its training hyper-parameters.
//
// Contract:
//  - A GPTConfig fully determines the parameter layout of every unit (see unit.h). Two workers
//    with equal configs and equal seeds build bit-identical initial weights, whatever their
//    pipeline partition.
//  - The vocabulary is byte-level (256) by default, so any text file is a token stream.
//  - ffn_hidden() is 4 * hidden, as in GPT-2.
//  - learning_rate(step) is linear warm-up then cosine decay to min_lr_ratio * lr; it is a pure
//    function of the step, so a resumed run follows the same schedule.
// Caveats: presets "tiny"/"small" exist for CPU tests (fast on one core); "gpt-125m" is the
// GPT-2 small shape (12 layers, 768 hidden, 12 heads, 1024 tokens) for the GPU bench, with a
// 32000-token vocabulary and an untied LM head: 135M parameters (GPT-2's 124M ties the head).
// Byte-level data (ids < 256) is valid input for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::worker {

struct GPTConfig {
  int num_layers = 4;  // transformer blocks (L)
  int hidden = 64;     // channels per token (C), the model width
  int heads = 4;       // attention heads; must divide hidden
  int seq_len = 64;    // tokens per sample (T), also the learned position table's length
  int vocab = 256;     // token ids are 0..vocab-1; 256 makes any byte stream valid data

  int ffn_hidden() const { return 4 * hidden; }
  int head_dim() const { return hidden / heads; }
  // Units: [embedding] [block 0..L-1] [final LN + LM head + loss].
  int num_units() const { return num_layers + 2; }
  // Total parameter count over all units.
  std::size_t parameter_count() const;
  bool operator==(const GPTConfig&) const = default;
};

// Empty string when the config is usable (positive sizes, hidden divisible by heads, every
// weight matrix under 2^31 elements); otherwise one line saying what is wrong.
std::string validate(const GPTConfig& config);

// "tiny" (2 layers, 32 hidden, 2 heads, 32 seq), "small" (4 layers, 64 hidden, 4 heads,
// 64 seq), "gpt-125m" (12 layers, 768 hidden, 12 heads, 1024 seq, vocab 32000). nullopt for unknown names.
std::optional<GPTConfig> gpt_preset(std::string_view name);

struct TrainConfig {
  float lr = 1e-3f;             // peak learning rate
  float min_lr_ratio = 0.1f;    // cosine decays to lr * min_lr_ratio
  std::int64_t warmup_steps = 10;   // linear ramp from lr/warmup_steps to lr
  std::int64_t total_steps = 1000;  // cosine horizon; steps beyond it stay at the minimum
  float beta1 = 0.9f;               // AdamW first-moment decay
  float beta2 = 0.95f;              // AdamW second-moment decay
  float eps = 1e-8f;                // AdamW denominator guard
  float weight_decay = 0.1f;    // decoupled (AdamW), applied to matrices only
  float grad_clip_norm = 1.0f;  // <= 0 disables clipping
  std::uint64_t seed = 1234;    // weight init (and, for the runtime, data order)
};

// Learning rate for optimizer step `step` (0-based). Linear warm-up over warmup_steps
// (lr * (step+1)/warmup_steps), then cosine from lr down to lr*min_lr_ratio at total_steps.
float learning_rate(const TrainConfig& train, std::int64_t step);

}  // namespace flotilla::worker
