#include "worker/model/stage.h"

#include "common/reference_models.h"

#include <new>
#include <stdexcept>
#include <string>

#include "worker/model/optimizer.h"

namespace flotilla::worker {

struct Stage::InFlight {
  int batch_size = 0;
  std::vector<std::unique_ptr<UnitActivations>> saved;  // one per unit, in unit order
};

Stage::Stage(const GPTConfig& config, int first_unit, int end_unit, std::uint64_t seed,
             Backend& backend)
    : config_(config), first_unit_(first_unit), end_unit_(end_unit), backend_(&backend) {
  if (const std::string err = validate(config); !err.empty()) throw std::invalid_argument(err);
  if (first_unit < 0 || end_unit > config.num_units() || first_unit >= end_unit)
    throw std::invalid_argument("stage unit range [" + std::to_string(first_unit) + ", " +
                                std::to_string(end_unit) + ") is empty or outside [0, " +
                                std::to_string(config.num_units()) + ")");
  units_.reserve(static_cast<std::size_t>(end_unit - first_unit));
  for (int u = first_unit; u < end_unit; ++u) units_.emplace_back(config, u, seed, backend);
}

Stage::~Stage() = default;

std::size_t Stage::activation_count(int batch_size) const {
  return static_cast<std::size_t>(batch_size) * config_.seq_len * config_.hidden;
}

namespace {
// Re-throws a failed allocation during a micro-batch as one line naming the activations.
[[noreturn]] void activations_out_of_memory(const GPTConfig& config, int first_unit, int end_unit, int batch_size,
                                            std::size_t in_flight, const char* pass, const std::string& memory,
                                            const std::string& note = "") {
  throw OutOfMemoryError("out of " + memory + " memory in the " + pass + " pass of a micro-batch of " +
                         std::to_string(batch_size) + " x " + std::to_string(config.seq_len) + " tokens on units [" +
                         std::to_string(first_unit) + ", " + std::to_string(end_unit) + ") with " +
                         std::to_string(in_flight) +
                         " micro-batches' activations held (one block's activations "
                         "alone are " +
                         bytes_text(block_activation_bytes(config, batch_size)) +
                         "); use a smaller --micro-batch, a smaller model or more pipeline stages (--pp)" + note);
}
}  // namespace

std::size_t block_activation_bytes(const GPTConfig& c, int batch_size) {
  const auto floats = static_cast<std::size_t>(
      reference_block_activation_floats(batch_size, c.seq_len, c.hidden, c.ffn_hidden(), c.heads));
  return floats * sizeof(float);
}

std::vector<float> Stage::forward(std::uint64_t id, const MicroBatch& batch,
                                  std::span<const float> in, float* loss) {
  try {
    return forward_impl(id, batch, in, loss);
  } catch (const std::bad_alloc&) {
    activations_out_of_memory(config_, first_unit_, end_unit_, batch.batch_size,
                              in_flight_.size(), "forward", "host");
  } catch (const OutOfMemoryError&) {
    activations_out_of_memory(config_, first_unit_, end_unit_, batch.batch_size, in_flight_.size(), "forward",
                              std::string(backend_->memory_kind()), out_of_memory_note(*backend_));
  }
}

std::vector<float> Stage::backward(std::uint64_t id, std::span<const float> grad_out,
                                   float dloss) {
  const auto it = in_flight_.find(id);
  const int batch_size = it == in_flight_.end() ? 0 : it->second->batch_size;
  try {
    return backward_impl(id, grad_out, dloss);
  } catch (const std::bad_alloc&) {
    activations_out_of_memory(config_, first_unit_, end_unit_, batch_size, in_flight_.size(),
                              "backward", "host");
  } catch (const OutOfMemoryError&) {
    activations_out_of_memory(config_, first_unit_, end_unit_, batch_size, in_flight_.size(), "backward",
                              std::string(backend_->memory_kind()), out_of_memory_note(*backend_));
  }
}

std::vector<float> Stage::forward_impl(std::uint64_t id, const MicroBatch& batch,
                                       std::span<const float> in, float* loss) {
  if (in_flight_.contains(id))
    throw std::invalid_argument("micro-batch id " + std::to_string(id) + " is already in flight");
  const std::size_t count = activation_count(batch.batch_size);
  Backend& be = *backend_;
  DeviceBuffer<float> current;
  if (!has_embedding()) {
    if (in.size() != count)
      throw std::invalid_argument("stage input has " + std::to_string(in.size()) +
                                  " floats, expected " + std::to_string(count));
    current = DeviceBuffer<float>(be, count);
    be.copy_from_host(current.data(), in.data(), current.bytes());
  }
  auto flight = std::make_unique<InFlight>();
  flight->batch_size = batch.batch_size;
  for (Unit& unit : units_) {
    DeviceBuffer<float> next;
    if (unit.kind() != UnitKind::kHead) next = DeviceBuffer<float>(be, count);
    flight->saved.push_back(unit.forward(batch, current.data(), next.data(), loss));
    current = std::move(next);
  }
  std::vector<float> out;
  if (!has_head()) {
    out.resize(count);
    be.copy_to_host(out.data(), current.data(), current.bytes());
  }
  in_flight_.emplace(id, std::move(flight));
  return out;
}

std::vector<float> Stage::backward_impl(std::uint64_t id, std::span<const float> grad_out,
                                        float dloss) {
  auto it = in_flight_.find(id);
  if (it == in_flight_.end())
    throw std::invalid_argument("backward for micro-batch id " + std::to_string(id) +
                                " that is not in flight");
  std::unique_ptr<InFlight> flight = std::move(it->second);
  in_flight_.erase(it);
  const std::size_t count = activation_count(flight->batch_size);
  Backend& be = *backend_;
  DeviceBuffer<float> dcurrent;
  if (!has_head()) {
    if (grad_out.size() != count)
      throw std::invalid_argument("stage output gradient has " + std::to_string(grad_out.size()) +
                                  " floats, expected " + std::to_string(count));
    dcurrent = DeviceBuffer<float>(be, count);
    be.copy_from_host(dcurrent.data(), grad_out.data(), dcurrent.bytes());
  }
  for (std::size_t k = units_.size(); k-- > 0;) {
    Unit& unit = units_[k];
    DeviceBuffer<float> din;
    if (unit.kind() != UnitKind::kEmbedding) din = DeviceBuffer<float>(be, count);  // zeroed
    unit.backward(std::move(flight->saved[k]), dcurrent.data(), din.data(), dloss);
    dcurrent = std::move(din);
  }
  std::vector<float> grad_in;
  if (!has_embedding()) {
    grad_in.resize(count);
    be.copy_to_host(grad_in.data(), dcurrent.data(), dcurrent.bytes());
  }
  return grad_in;
}

void Stage::discard(std::uint64_t id) { in_flight_.erase(id); }

void Stage::zero_grads() {
  for (Unit& u : units_) u.zero_grads();
}

std::vector<double> Stage::grad_sum_squares() {
  std::vector<double> out;
  out.reserve(units_.size());
  for (Unit& u : units_) out.push_back(u.grad_sum_squares());
  return out;
}

void Stage::adamw_step(const TrainConfig& train, std::int64_t step, float grad_scale) {
  const float lr = learning_rate(train, step);
  for (Unit& u : units_) u.adamw_step(train, step, lr, grad_scale);
}

}  // namespace flotilla::worker
