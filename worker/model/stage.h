// Stage: a contiguous range of units [first_unit, end_unit) on one backend, with host-side
// activation I/O for the pipeline runtime.
//
// Contract:
//  - forward(id, ...) runs the units in order and keeps their saved activations under `id`
//    until backward(id, ...) consumes them, so several micro-batches can be in flight (1F1B).
//  - Activations crossing a stage boundary are [B, seq_len, hidden] float32, exchanged as host
//    vectors. Because a unit's math never depends on where the boundary is, any partition of
//    the same units produces bit-identical losses and gradients (CPU backend).
//  - backward() accumulates into each unit's grads; the caller zeroes them per step
//    (zero_grads) and fixes the micro-batch order.
//  - grad_sum_squares() returns one double per unit (unit order). The global grad norm MUST be
//    reduced as: total = 0.0; for unit u = 0..L+1 in index order: total += sumsq[u]; norm =
//    sqrt(total). See optimizer.h clip_scale(). This is what makes clipping partition-free.
//  - Running out of memory in forward/backward throws OutOfMemoryError naming the micro-batch
//    size, the units, the activations held and the fix (never a bare std::bad_alloc).
// Caveat: not thread-safe; one thread drives a stage.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "worker/model/unit.h"

namespace flotilla::worker {

// Bytes of the activations one transformer block saves for one micro-batch (for error
// messages and memory estimates).
std::size_t block_activation_bytes(const GPTConfig& config, int batch_size);

class Stage {
 public:
  // Builds units [first_unit, end_unit) with deterministic init from `seed`.
  Stage(const GPTConfig& config, int first_unit, int end_unit, std::uint64_t seed,
        Backend& backend);
  ~Stage();

  const GPTConfig& config() const { return config_; }
  int first_unit() const { return first_unit_; }
  int end_unit() const { return end_unit_; }
  bool has_embedding() const { return first_unit_ == 0; }
  bool has_head() const { return end_unit_ == config_.num_units(); }
  // Floats in one boundary activation for a micro-batch of `batch_size` sequences.
  std::size_t activation_count(int batch_size) const;

  std::vector<Unit>& units() { return units_; }
  Unit& unit(int unit_index) { return units_.at(unit_index - first_unit_); }

  // Forward micro-batch `id`. `in` is the previous stage's output (empty when has_embedding()).
  // Returns this stage's output activations, or an empty vector when has_head(), in which case
  // *loss gets the micro-batch's mean loss.
  std::vector<float> forward(std::uint64_t id, const MicroBatch& batch, std::span<const float> in,
                             float* loss);
  // Backward micro-batch `id`. grad_out is the next stage's input gradient (empty when
  // has_head(); then dloss seeds the loss). Returns the gradient w.r.t. this stage's input
  // (empty when has_embedding()).
  std::vector<float> backward(std::uint64_t id, std::span<const float> grad_out, float dloss);
  // Drops saved activations of `id` without backward (e.g. evaluation).
  void discard(std::uint64_t id);
  std::size_t in_flight() const { return in_flight_.size(); }

  void zero_grads();
  std::vector<double> grad_sum_squares();
  void adamw_step(const TrainConfig& train, std::int64_t step, float grad_scale);

 private:
  std::vector<float> forward_impl(std::uint64_t id, const MicroBatch& batch,
                                  std::span<const float> in, float* loss);
  std::vector<float> backward_impl(std::uint64_t id, std::span<const float> grad_out,
                                   float dloss);
  struct InFlight;
  GPTConfig config_;
  int first_unit_ = 0;
  int end_unit_ = 0;
  Backend* backend_ = nullptr;
  std::vector<Unit> units_;
  std::map<std::uint64_t, std::unique_ptr<InFlight>> in_flight_;
};

}  // namespace flotilla::worker
