// What the scaler needs to know about one elastic training job's model: the pipeline layer
// count L, the global batch, the layout it was submitted with, and a per-layer cost and memory
// model used to predict iteration time and peak memory for other layouts.
//
// Guarantees: the presets reproduce FlexTrain Table 2 (layers, MTP heads, batch, sequence,
//   DP/PP/TP/CP degrees, initial GPU count). validate() names the first bad field.
// Assumes: the per-layer costs are ESTIMATES, not measurements (FlexTrain does not publish
//   per-layer times): forward seconds = 2 * active params per layer * tokens per GPU / (H100
//   dense bf16 peak 989 TFLOP/s * 40 % MFU), backward = 2x forward; static bytes per layer per
//   GPU = 4 bytes per parameter (bf16 weights + grads) plus 12 (fp32 master + Adam m,v) sharded
//   over DP x CP (Megatron's distributed optimizer), all over EP x TP shards; see
//   docs/scaler.md. Dense planner presets use the planner's time and memory model instead
//   (planner_predictor.h); these estimates remain for the Table-2 MoE jobs, which the planner
//   cannot model (no MoE, no context parallelism).
// Caveats: MoE routing imbalance, EP all-to-all and CP ring attention costs are folded into the
//   MFU, not modelled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scaler/parallel_config.h"

namespace flotilla::scaler {

struct ElasticModel {
  std::string name;
  int transformer_layers = 0;
  int extra_layers = 0;       // MTP heads: pipeline layers that cost extra_layer_cost_factor
  int global_batch = 0;       // B, in micro-batches of size 1
  int seq_len = 0;
  ParallelConfig initial;     // the layout the job was submitted with

  double layer_fwd_s = 0;     // one transformer layer, one micro-batch, on its TPxCP group
  double layer_bwd_s = 0;
  double extra_layer_cost_factor = 1.5;  // an MTP head (embedding + layer + CE loss) vs a layer
  double embedding_cost_factor = 0.5;    // embedding on the first stage, head+loss on the last
  double layer_static_bytes = 0;         // weights + grads + optimizer states, per layer per GPU
  double embedding_static_bytes = 0;     // embedding (first stage) and head (last stage), each
  double layer_activation_bytes = 0;     // per layer per in-flight micro-batch per GPU
  double gpu_memory_bytes = 80e9;
  double p2p_s = 0;                      // one activation transfer between adjacent stages
  double layer_grad_bytes = 0;           // gradient bytes per layer per GPU (DP all-reduce)
  double dp_bytes_per_s = 50e9;          // effective all-reduce bus bandwidth between replicas
  double checkpoint_bytes = 0;           // whole job checkpoint (weights + optimizer states)

  int pipeline_layers() const { return transformer_layers + extra_layers; }  // FlexTrain's L

  // Empty when usable, else one line naming the bad field and what to fix.
  std::string validate() const;
};

// FlexTrain Table 2: "small" (1B/7B MoE, 32 GPUs), "medium" (6B/60B, 64), "large" (30B/600B, 256).
std::optional<ElasticModel> flextrain_preset(const std::string& name);

// The Table-2 preset for a job requesting `gpus` GPUs: small for [min_gpus, 64), medium for
// [64, 256), large for >= 256 (FlexTrain §7.4). Its layout keeps the preset's DP, TP and CP and
// sets PP = gpus / (dp*tp*cp). Empty if gpus < min_gpus, the count is not a multiple of
// dp*tp*cp, or PP would exceed the layer count: such a job is simulated as non-elastic.
std::optional<ElasticModel> model_for_trace_job(int gpus, int min_gpus);

}  // namespace flotilla::scaler
