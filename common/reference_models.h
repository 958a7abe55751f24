// The reference worker's model shapes (worker/, `--model NAME`), the one table both the worker
// and the planner read, so a TrainingJob naming "small" is planned for exactly the model its
// pods train.
//
// Guarantees: names are unique; every shape is a GPT with a learned position table of seq_len
//   rows, MLP width 4 x hidden, LayerNorm, and an untied LM head (worker/model/config.h).
// Assumes: nothing (header-only constants, included by rooms that do not link each other).
#pragma once

#include <string>
#include <string_view>

namespace flotilla {

struct ReferenceModelShape {
  std::string_view name;
  int num_layers;
  int hidden;
  int heads;
  int seq_len;
  int vocab;
};

// tiny and small are for CPU tests and the demo (fast on one core); gpt-125m is GPT-2 small's
// shape with a 32000-token vocabulary, for the GPU bench.
inline constexpr ReferenceModelShape kReferenceModels[] = {
    {"tiny", 2, 32, 2, 32, 256},
    {"small", 4, 64, 4, 64, 256},
    {"gpt-125m", 12, 768, 12, 1024, 32000},
};

// The names, comma-separated in table order ("tiny, small, gpt-125m"), for errors that list them.
inline std::string reference_model_names() {
  std::string names;
  for (const ReferenceModelShape& m : kReferenceModels) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

// Floats one transformer block of the reference worker keeps for the backward pass of one
// micro-batch of `batch` sequences (fp32, no dropout, materialised attention probabilities): x,
// ln1, attention output, residual, ln2 (N x C each), qkv (3 N x C), the MLP's inner activation
// before and after GELU (N x F each), the attention probabilities (batch x heads x T x T) and
// four LayerNorm statistics of N floats. The worker allocates exactly this (worker/model/
// stage.cpp); the planner's memory model counts it for TrainingJobs of the reference worker.
constexpr double reference_block_activation_floats(double batch, double seq_len, double hidden, double ffn_hidden,
                                                   double heads) {
  const double n = batch * seq_len;
  return 8 * n * hidden + 2 * n * ffn_hidden + batch * heads * seq_len * seq_len + 4 * n;
}

}  // namespace flotilla
