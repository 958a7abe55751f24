// The pace of one pipeline stage on an emulated GPU (common/emulated_gpu.h): how long its
// forward and backward of one micro-batch and its optimizer step take on that GPU type, from the
// FLOP count the planner's time model uses (common/transformer_flops.h), so the planner predicts
// what the emulated worker measures.
//
// Guarantees: forward_seconds(b) = b x the stage's forward FLOPs per sequence / flops_per_s;
//   backward = kBackwardPerForwardFlops x forward; update_seconds = the stage's parameters x 32 B
//   / memory bandwidth. pad_until() sleeps until start + seconds and returns at once when the
//   real work already took longer (an emulated GPU can be slower than the CPU, never faster).
// Assumes: the stage's units are [first_unit, end_unit) of `config` (0 = embedding: no FLOPs,
//   1..L = layers, L+1 = final norm + LM head).
// Caveats: the padding is a sleep, so what the CPU really does must stay below the emulated
//   time (true for the demo's types by a wide margin; docs/worker.md "Emulated GPUs").
#pragma once

#include <chrono>

#include "common/emulated_gpu.h"
#include "worker/model/config.h"

namespace flotilla::worker {

class EmulatedPace {
 public:
  EmulatedPace(const GPTConfig& config, int first_unit, int end_unit, const EmulatedGpu& gpu);

  double forward_seconds(int micro_batch_size) const { return forward_seconds_per_sequence_ * micro_batch_size; }
  double backward_seconds(int micro_batch_size) const;
  double update_seconds() const { return update_seconds_; }

 private:
  double forward_seconds_per_sequence_ = 0;
  double update_seconds_ = 0;
};

void pad_until(std::chrono::steady_clock::time_point start, double seconds);

}  // namespace flotilla::worker
