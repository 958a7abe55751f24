// What Megatron-LM says about its progress, read by the sidecar for worker kind megatron: the
// training log line the last rank prints every --log-interval iterations, and the checkpoint
// tracker file its --save folder holds.
//
// Guarantees: parse_megatron_log_line() reads the line `training_log()` prints
//   (megatron/training/training.py in the Megatron-LM snapshot:
//   " [date] iteration N/ M | consumed samples: S | elapsed time per iteration (ms): T |
//   ... | global batch size: B | lm loss: X | ...", fields separated by " |"), wherever it
//   sits in the line (a launcher may prefix it), and returns nullopt for any other line or one
//   whose iteration, elapsed time or global batch size does not parse. `iteration` is the
//   number of completed optimizer steps (Megatron increments it before logging).
//   megatron_tokens_per_second() = global batch x sequence length / iteration seconds (0 when
//   either is unknown). parse_megatron_tracker() reads latest_checkpointed_iteration.txt: the
//   iteration of the newest complete checkpoint, nullopt for "release" or anything else.
// Assumes: the format of that snapshot; a later Megatron that renames a field makes the line
//   unread (no progress), not misread.
// Caveats: pure (no I/O). The elapsed time is Megatron's mean over the log interval.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace flotilla::sidecar {

struct MegatronLogLine {
  std::int64_t iteration = 0;    // completed steps
  std::int64_t train_iters = 0;  // --train-iters
  std::int64_t consumed_samples = 0;
  double iteration_ms = 0;  // "elapsed time per iteration (ms)"
  int global_batch_size = 0;
  std::optional<double> lm_loss;  // absent on lines of an iteration whose loss Megatron skipped
};

std::optional<MegatronLogLine> parse_megatron_log_line(std::string_view line);

double megatron_tokens_per_second(const MegatronLogLine& line, int seq_length);

std::optional<std::int64_t> parse_megatron_tracker(std::string_view text);

}  // namespace flotilla::sidecar
