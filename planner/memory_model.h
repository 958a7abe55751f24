// Per-rank peak memory of a pipeline stage (Sailor §4.2-style, Korthikanti et al. activations).
//
// Guarantees: stage_memory() is O(1) (closed form; no loop over layers) so the search can call
//   it millions of times. Its peak never falls as in_flight_micro_batches grows (only the
//   activations scale with it; the stage DP's memory rows rely on this). Every rank of a stage holds the same bytes (TP shards evenly), so a
//   plan's per-rank report is the stage's breakdown against each rank's own capacity.
// Assumes (defaults match Megatron-DeepSpeed fp16 + Adam as in Sailor's runs):
//   - weights/grads/optimizer: mixed precision = 2 B fp16 weights + 2 B fp16 grads (DeepSpeed/
//     Megatron keep fp32 main grads too: 4 B) + 12 B optimizer (fp32 master + Adam m, v);
//     ZeRO-1 shards the 12 B over DP, ZeRO-2 also the grads, ZeRO-3 also the weights.
//   - activations per layer per micro-batch (Korthikanti et al. 2022, bytes; options select
//     an op-level runtime or an unfused fp32 softmax, attention_score_bytes_per_element()):
//       none:      s*b*h*(34/sp_div + 5*a*s/(h*t))  with 34 = 10 + 24/t without SP (10 stays
//                  replicated), = 34/t with sequence parallel
//       selective: s*b*h*34/t (SP) or s*b*h*(10 + 24/t)
//       full:      2*s*b*h/t-ish: only the layer input is kept (s*b*h*2 bytes, /t with SP)
//   - 1F1B: stage i of p holds activations of min(p - i, m) micro-batches.
//   - embedding on the first stage, LM head on the last (a tied head on a different stage
//     keeps its own copy, as Megatron does); logits fp32 on the last stage.
//   - communication buffers: p2p send/recv of one micro-batch activation; allocator overhead:
//     a fraction of the dynamic bytes plus the GPU type's runtime overhead (CUDA context, NCCL,
//     cache), both calibrated once over all of Sailor's Clariden runs (docs/planner.md).
//   - FlashAttention (options.flash_attention, on GPUs that run it): no a*s*s score terms; the
//     layer keeps Q, K, V and the output (already in the linear terms) plus the fp32 softmax
//     logsumexp, 4*a*s*b/t bytes; the dropout RNG seed is a few bytes (ignored).
//   - op-level runtime (options.op_level_activations, Aceso): every op's output stays alive,
//     14 replicated sbh instead of 10, 7 or 11 B per attention score, 4 B logits; a stage may
//     hold part of a layer (StageShape's partial-layer ops, counted per op).
// Caveats: peak is modelled at the end of the last warm-up forward (the 1F1B high-water mark)
//   plus the transient of the first backward; no fragmentation model beyond the constant.
//   Partial-layer ops are counted in a short loop (<= 2 x 13 ops), still O(1) in the layers.
//   The two framework options are validated only on OPT-350M (Clariden; megatron-runs).
#pragma once

#include <cstdint>

#include "planner/model_spec.h"
#include "planner/plan.h"

namespace flotilla::planner {

struct StageShape {
  int first_block = 0;
  int last_block = 0;  // exclusive
  int tp = 1;
  int dp = 1;
  int micro_batch_size = 1;
  int in_flight_micro_batches = 1;  // in_flight_micro_batches(stage, p, m)
  TrainingOptions options;
  // Op-level partitions (Aceso's runtime, kOpsPerLayer ops per layer in its order): the stage
  // also holds the last `tail_ops_of_previous_layer` ops of layer first_block - 1 and the first
  // `head_ops_of_next_layer` ops of layer last_block. 0 for Flotilla's layer-granular plans.
  int tail_ops_of_previous_layer = 0;
  int head_ops_of_next_layer = 0;
};

// Aceso's GPT layer as 13 ops: LN1, QKV, score, softmax, dropout, context, dense, residual
// dropout, LN2, GEMM1, GeLU, GEMM2, residual dropout.
inline constexpr int kOpsPerLayer = 13;

// Activation bytes held by ops [first_op, last_op) of one GPT layer for one micro-batch on one
// rank, in an op-level runtime (per op: what stays alive; they sum to block_activation_bytes
// with op_level_activations set). Parameters of those ops per rank likewise.
std::int64_t layer_ops_activation_bytes(const ModelSpec& model, int first_op, int last_op, int tp,
                                        int micro_batch_size, const TrainingOptions& options);
std::int64_t layer_ops_params_per_rank(const ModelSpec& model, int first_op, int last_op, int tp);

struct MemoryBreakdown {
  std::int64_t weights_bytes = 0;
  std::int64_t grads_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  std::int64_t activations_bytes = 0;  // all in-flight micro-batches
  std::int64_t transient_bytes = 0;    // logits / backward workspace of one micro-batch
  std::int64_t comm_buffer_bytes = 0;
  std::int64_t overhead_bytes = 0;     // allocator fragmentation on dynamic bytes
  std::int64_t peak_bytes = 0;         // the sum (without the GPU's runtime overhead)
};

// Global constants of the model, calibrated once (docs/planner.md); overridable for studies.
// The per-GPU runtime overhead (CUDA context, NCCL, allocator cache) is not here but in
// GpuType::runtime_overhead_bytes: rank peak = stage_memory().peak_bytes + that overhead.
struct MemoryModelConstants {
  double allocator_fraction = 0.0452;    // fragmentation: extra fraction of dynamic bytes
  double logits_bytes_per_element = 12;  // last stage, one micro-batch, per (token x vocab/t)
};
const MemoryModelConstants& default_memory_constants();

// 1F1B: stage i (0-based) of p stages with m micro-batches holds min(p - i, m).
inline int in_flight_micro_batches(int stage_index, int num_stages, int num_micro_batches) {
  const int k = num_stages - stage_index;
  return k < num_micro_batches ? k : num_micro_batches;
}

// Parameters held by one rank of a stage (after TP sharding, before ZeRO).
std::int64_t stage_params_per_rank(const ModelSpec& model, int first_block, int last_block,
                                   int tp);
// Bytes held per attention-score element (a*s*s*b/t of them per layer): 5 for fused Megatron
// layers (Korthikanti), 7 with an unfused fp32 softmax, 7 for an op-level runtime with a fused
// softmax (Aceso's own op profile), 11 for an op-level runtime with an unfused fp32 softmax.
double attention_score_bytes_per_element(const TrainingOptions& options);
// The options a rank on a GPU type actually runs: FlashAttention only where the GPU supports it
// (GpuType::supports_flash_attention; Ampere and newer), else materialised scores.
inline TrainingOptions options_on_gpu(TrainingOptions options, bool gpu_supports_flash_attention) {
  options.flash_attention = options.flash_attention && gpu_supports_flash_attention;
  return options;
}
// FlashAttention's per-layer softmax statistics: fp32 logsumexp per (batch, head, query), per
// rank (heads split t ways). 0 without flash.
double flash_softmax_stats_bytes(const ModelSpec& model, int tp, int micro_batch_size,
                                 const TrainingOptions& options);
// Activation bytes of one block for one micro-batch on one rank.
std::int64_t block_activation_bytes(const ModelSpec& model, int block, int tp,
                                    int micro_batch_size, const TrainingOptions& options);

// Peak of one rank of a stage on a given GPU type (adds the GPU's runtime overhead).
std::int64_t rank_peak_bytes(const MemoryBreakdown& stage, std::int64_t runtime_overhead_bytes);

MemoryBreakdown stage_memory(const ModelSpec& model, const StageShape& shape,
                             const MemoryModelConstants& constants = default_memory_constants());

}  // namespace flotilla::planner
