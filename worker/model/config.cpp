#include "worker/model/config.h"

#include "common/reference_models.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "worker/model/unit.h"

namespace flotilla::worker {

std::size_t GPTConfig::parameter_count() const {
  std::size_t total = 0;
  for (int u = 0; u < num_units(); ++u) total += unit_param_count(*this, u);
  return total;
}

std::string validate(const GPTConfig& c) {
  if (c.num_layers < 1) return "num_layers must be >= 1 (got " + std::to_string(c.num_layers) + ")";
  if (c.hidden < 1 || c.heads < 1)
    return "hidden and heads must be >= 1 (got hidden " + std::to_string(c.hidden) + ", heads " +
           std::to_string(c.heads) + ")";
  if (c.hidden % c.heads != 0)
    return "hidden (" + std::to_string(c.hidden) + ") must be divisible by heads (" +
           std::to_string(c.heads) + ")";
  if (c.seq_len < 1) return "seq_len must be >= 1 (got " + std::to_string(c.seq_len) + ")";
  if (c.vocab < 2) return "vocab must be >= 2 (got " + std::to_string(c.vocab) + ")";
  // Tensor shapes and element counts are ints in the ops; the largest weight matrix is
  // C x 4C (MLP), V x C (embedding, LM head) or T x C (positions).
  const long long C = c.hidden;
  const long long largest = C * std::max({4 * C, static_cast<long long>(c.vocab),
                                          static_cast<long long>(c.seq_len)});
  if (largest > std::numeric_limits<int>::max())
    return "the largest weight matrix would hold " + std::to_string(largest) +
           " elements, more than a tensor can index (2^31 - 1); use a smaller hidden, vocab or "
           "seq_len";
  return {};
}

std::optional<GPTConfig> gpt_preset(std::string_view name) {
  for (const ReferenceModelShape& m : kReferenceModels)
    if (m.name == name)
      return GPTConfig{
          .num_layers = m.num_layers, .hidden = m.hidden, .heads = m.heads, .seq_len = m.seq_len, .vocab = m.vocab};
  return std::nullopt;
}

float learning_rate(const TrainConfig& train, std::int64_t step) {
  if (train.warmup_steps > 0 && step < train.warmup_steps)
    return static_cast<float>(static_cast<double>(train.lr) * static_cast<double>(step + 1) /
                              static_cast<double>(train.warmup_steps));
  const double min_lr = static_cast<double>(train.lr) * train.min_lr_ratio;
  const std::int64_t decay_steps = train.total_steps - train.warmup_steps;
  if (decay_steps <= 0 || step >= train.total_steps) return static_cast<float>(min_lr);
  const double progress =
      static_cast<double>(step - train.warmup_steps) / static_cast<double>(decay_steps);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return static_cast<float>(min_lr + cosine * (static_cast<double>(train.lr) - min_lr));
}

}  // namespace flotilla::worker
