// The reference worker's model shapes (worker/, `--model NAME`), the one table both the worker
// and the planner read, so a TrainingJob naming "small" is planned for exactly the model its
// pods train.
//
// Guarantees: names are unique; every shape is a GPT with a learned position table of seq_len
//   rows, MLP width 4 x hidden, LayerNorm, and an untied LM head (worker/model/config.h).
// Assumes: nothing (header-only constants, included by rooms that do not link each other).
#pragma once

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

}  // namespace flotilla
