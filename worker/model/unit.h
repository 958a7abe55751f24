// Units: the pipeline-partitionable pieces of the GPT, and their parameters.
//
// A model with L layers has L+2 units, indexed 0..L+1:
//   unit 0        embedding: wte [V,C] + wpe [T,C]      tokens [B,T]   -> x [B,T,C]
//   unit 1..L     pre-LN transformer block l = index-1  x [B,T,C]      -> x [B,T,C]
//   unit L+1      head: final LN, LM head [C,V] (untied), cross-entropy -> mean loss
// Contract:
//  - Each unit owns four flat float32 buffers of equal size on its backend: params, grads,
//    AdamW m and v. unit_param_layout() names the tensors inside the flat buffer (offsets in
//    floats), so checkpoints can be written and read per unit on any layout.
//  - init_unit_params() depends ONLY on (config, unit index, seed): any partition builds
//    bit-identical initial weights.
//  - forward/backward results depend only on the inputs and parameters, never on thread
//    count or partition. backward ACCUMULATES into grads(); the caller fixes the order of
//    micro-batches and zeroes grads between optimizer steps.
//  - The LM head is not tied to wte, so the first and last stages share no parameter.
//  - Running out of memory while building a unit throws OutOfMemoryError naming the unit, its
//    bytes and the fix (smaller model, more pipeline stages), never a bare std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/model/backend.h"
#include "worker/model/config.h"

namespace flotilla::worker {

enum class UnitKind { kEmbedding, kBlock, kHead };

struct ParamTensor {
  std::string name;       // e.g. "wte", "ln1.weight", "qkv.weight"
  std::size_t offset = 0;  // in floats, inside the unit's flat buffer
  std::size_t count = 0;
  std::vector<int> shape;
  bool weight_decay = false;  // true for matrices (and embeddings), false for biases and LN
};

UnitKind unit_kind(const GPTConfig& config, int unit_index);
std::string unit_name(const GPTConfig& config, int unit_index);  // "embedding", "block3", "head"
std::vector<ParamTensor> unit_param_layout(const GPTConfig& config, int unit_index);
std::size_t unit_param_count(const GPTConfig& config, int unit_index);
// Deterministic GPT-2 style init from (seed, unit index) only: matrices N(0, 0.02), residual
// output projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weight 1 and bias 0.
std::vector<float> init_unit_params(const GPTConfig& config, int unit_index, std::uint64_t seed);

// What one micro-batch looks like to a unit. tokens/targets are HOST arrays of B*T entries;
// targets are needed only by the head, tokens only by the embedding.
struct MicroBatch {
  int batch_size = 0;  // B sequences
  const std::int32_t* tokens = nullptr;
  const std::int32_t* targets = nullptr;
};

// Activations a unit saved in forward for its backward. Opaque to callers.
class UnitActivations {
 public:
  virtual ~UnitActivations() = default;
};

class Unit {
 public:
  Unit(const GPTConfig& config, int unit_index, std::uint64_t seed, Backend& backend);
  ~Unit();
  Unit(Unit&&) noexcept;
  Unit& operator=(Unit&&) noexcept;

  int index() const { return index_; }
  UnitKind kind() const { return kind_; }
  const GPTConfig& config() const { return config_; }
  Backend& backend() { return *backend_; }
  std::size_t param_count() const { return params_.size(); }
  // Device pointers (host pointers on the CPU backend).
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  float* adam_m() { return m_.data(); }
  float* adam_v() { return v_.data(); }

  // Host copies for checkpoints; set_state() takes vectors of param_count() floats.
  void get_state(std::vector<float>* params, std::vector<float>* m, std::vector<float>* v);
  void set_state(const std::vector<float>& params, const std::vector<float>& m,
                 const std::vector<float>& v);
  void get_grads(std::vector<float>* grads);
  void set_grads(const std::vector<float>& grads);
  void zero_grads() { grads_.zero(); }

  // Forward one micro-batch. `in` is a device buffer [B,T,C] (ignored by the embedding).
  // `out` is a device buffer [B,T,C] (ignored by the head, which writes *loss instead: the
  // mean cross-entropy over the B*T tokens, summed in double).
  std::unique_ptr<UnitActivations> forward(const MicroBatch& batch, const float* in, float* out,
                                           float* loss);
  // Backward one micro-batch. dout [B,T,C] is ignored by the head, which seeds from
  // dloss = d(objective)/d(this micro-batch's mean loss). din [B,T,C] is ACCUMULATED into
  // (ignored by the embedding). Releases the saved activations.
  void backward(std::unique_ptr<UnitActivations> saved, const float* dout, float* din,
                float dloss);

  // Sum over this unit's grads of g*g, in double, fixed order.
  double grad_sum_squares();
  // AdamW step t = step+1 with the given lr and clip scale (see optimizer.h).
  void adamw_step(const TrainConfig& train, std::int64_t step, float lr, float grad_scale);

 private:
  void allocate_state(std::uint64_t seed);
  [[noreturn]] void throw_out_of_memory(const std::string& memory, const std::string& note = "") const;
  GPTConfig config_;
  int index_ = 0;
  UnitKind kind_ = UnitKind::kBlock;
  Backend* backend_ = nullptr;
  DeviceBuffer<float> params_, grads_, m_, v_;
  DeviceBuffer<std::uint8_t> decay_mask_;
};

}  // namespace flotilla::worker
