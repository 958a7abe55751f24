// The 1F1B (one-forward-one-backward) pipeline schedule of PipeDream-Flush / Megatron.
//
// Guarantees: for stage s of p and n micro-batches, the list holds each F(i) and B(i) exactly
//   once; forwards and backwards each run in micro-batch order 0..n-1; a stage starts with
//   min(p - s - 1, n) warm-up forwards, then alternates F/B, then drains the backwards, so at
//   most p - s activations are stashed at once. Backwards in micro-batch order is what lets
//   gradient accumulation be bit-identical across pipeline degrees.
// Assumes: every stage runs the same n. Pure function.
#pragma once

#include <vector>

namespace flotilla::worker {

struct PipelineOp {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PipelineOp&) const = default;
};

std::vector<PipelineOp> one_f_one_b(int stage, int num_stages, int num_micro_batches);

}  // namespace flotilla::worker
