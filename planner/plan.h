// A training plan: pipeline stages, each a block range with a TP degree and DP replicas.
//
// Guarantees: general enough for heterogeneous plans (every replica names its GPU type and
//   zone; layer splits may be uneven). validate_plan() checks the invariants the models rely on.
// Assumes: blocks are indexed as in model_spec.h (0 = embedding, 1..L layers, L+1 = head);
//   stage s covers [first_block, last_block); stages are contiguous and cover 0..L+2.
//   Every stage has the same number of DP replicas (a micro-batch flows through one replica
//   per stage). A replica uses the stage's TP degree unless it names its own (Replica::tp, as
//   Sailor's plan format allows): replicas of one stage may differ in GPU type and TP, and
//   evaluate() times and checks each on its own GPU and TP (the slowest bounds the stage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/result.h"

namespace flotilla::planner {

enum class Precision { kFp32, kFp16Mixed, kBf16Mixed };
enum class Recompute { kNone, kSelective, kFull };

struct TrainingOptions {
  Precision precision = Precision::kFp16Mixed;
  int zero_stage = 0;  // 0..3 (ZeRO-1 shards optimizer, 2 also grads, 3 also weights)
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  // How the framework holds activations (docs/planner.md, "Two activation layouts"):
  // false = fused Megatron layers (Korthikanti's count; Megatron-LM / Megatron-DeepSpeed).
  // true = an op-level runtime (Aceso's Megatron fork, 13 modules per layer) that keeps every
  //   op's output alive as the next op's input: + the raw attention scores, the attention and
  //   MLP output projections.
  bool op_level_activations = false;
  // false = the softmax runs unfused in fp32 (apply_query_key_layer_scaling forces fp32
  // softmax): it saves fp32 probabilities (4 B per score) instead of fp16 ones.
  bool fused_softmax = true;
  // true = FlashAttention (Megatron-LM + Transformer Engine, DeepSpeed, torch SDPA): the a*s*s
  // scores are never materialised; each layer keeps the fp32 softmax logsumexp (4 B per
  // (batch, head, query)) and a dropout RNG seed instead. Applied only on GPU types that run it
  // (GpuType::supports_flash_attention; stages on others keep materialised scores). false keeps
  // Korthikanti's count (Sailor's runs, the validation).
  bool flash_attention = false;
  // true = Flotilla's reference worker (worker/): fp32 activations, no dropout, materialised
  // fp32 attention probabilities, exactly common/reference_models.h's count per block; the
  // options above that describe Megatron's layers are then ignored. TP 1 only (the worker has
  // no tensor parallelism).
  bool reference_worker_activations = false;
};

struct Replica {
  std::string gpu_type;
  std::string zone;
  // How many of this replica's TP GPUs sit in one node (Sailor's gpus_in_node); 0 = all.
  int gpus_per_node = 0;
  // This replica's TP degree; 0 = the stage's (Stage::tp). Set only where replicas differ.
  int tp = 0;
};

struct Stage {
  int first_block = 0;
  int last_block = 0;  // exclusive
  int tp = 1;
  std::vector<Replica> replicas;

  int num_blocks() const { return last_block - first_block; }
  int dp() const { return static_cast<int>(replicas.size()); }
  // Replica r's TP degree (its own, else the stage's).
  int replica_tp(int r) const {
    const int own = replicas[static_cast<std::size_t>(r)].tp;
    return own > 0 ? own : tp;
  }
  // True when every replica runs the stage's TP.
  bool uniform_tp() const {
    for (const Replica& r : replicas)
      if (r.tp > 0 && r.tp != tp) return false;
    return true;
  }
  int num_gpus() const {
    int n = 0;
    for (int r = 0; r < dp(); ++r) n += replica_tp(r);
    return n;
  }
};

struct Plan {
  std::vector<Stage> stages;
  int micro_batch_size = 1;
  int global_batch_size = 1;
  TrainingOptions options;

  int num_stages() const { return static_cast<int>(stages.size()); }
  int dp() const { return stages.empty() ? 0 : stages.front().dp(); }
  // Micro-batches per replica per iteration: gbs / (mbs * dp), rounded up.
  int num_micro_batches() const;
  int num_gpus() const;
};

// Empty string when valid, else one line (e.g. "stage 1 starts at block 13 but stage 0 ends at 12").
std::string validate_plan(const Plan& plan, int num_blocks);

}  // namespace flotilla::planner
