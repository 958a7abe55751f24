#include "planner/memory_model.h"

#include <algorithm>

namespace flotilla::planner {
namespace {

using i64 = std::int64_t;

i64 embed_width(const ModelSpec& m) { return m.embed_proj_dim > 0 ? m.embed_proj_dim : m.hidden; }

// Parameters of one transformer layer on one TP rank: matmul weights (and their biases) are
// split t ways; norms and the biases applied after a row-parallel matmul are replicated.
i64 layer_params_per_rank(const ModelSpec& m, int tp) {
  const i64 h = m.hidden;
  const i64 q = static_cast<i64>(m.heads) * m.head_dim;
  const i64 kv = static_cast<i64>(m.effective_kv_heads()) * m.head_dim;
  const i64 f = m.ffn_hidden;
  if (m.family == ModelFamily::kGpt) {
    const i64 sharded = h * (q + 2 * kv) + (q + 2 * kv) + q * h + 2 * h * f + f;
    const i64 replicated = h /*o bias*/ + h /*fc2 bias*/ + 4 * h /*2 LayerNorms*/;
    return (sharded + tp - 1) / tp + replicated;
  }
  const i64 sharded = h * (q + 2 * kv) + q * h + 3 * h * f;
  return (sharded + tp - 1) / tp + 2 * h;
}

// Bytes per parameter of each static class for the given options (before ZeRO sharding).
struct StaticBytes {
  double weights, grads, optimizer;
};
StaticBytes static_bytes_per_param(const TrainingOptions& o) {
  if (o.precision == Precision::kFp32) return {4, 4, 8};  // Adam m, v
  // fp16/bf16 mixed precision (Megatron): 2 B model weights, 4 B fp32 main grads (gradients
  // accumulate in fp32), 4 B fp32 master weights + 8 B Adam moments = 12 B optimizer.
  return {2, 4, 12};
}

}  // namespace

std::int64_t stage_params_per_rank(const ModelSpec& m, int first_block, int last_block, int tp) {
  i64 n = 0;
  const int head_block = m.num_layers + 1;
  const int layers_lo = std::max(first_block, 1);
  const int layers_hi = std::min(last_block, head_block);
  if (layers_hi > layers_lo) n += (layers_hi - layers_lo) * layer_params_per_rank(m, tp);
  const i64 vocab_shard = (static_cast<i64>(m.vocab) * embed_width(m) + tp - 1) / tp;
  if (first_block == 0) {
    n += vocab_shard;  // vocab-parallel word embeddings
    if (m.family == ModelFamily::kGpt) n += static_cast<i64>(m.max_position_embeddings) * m.hidden;
    if (m.embed_proj_dim > 0) n += static_cast<i64>(m.embed_proj_dim) * m.hidden;
  }
  if (last_block > head_block) {
    n += head_params(m) - (m.tied_embeddings ? 0 : head_matrix_params(m));  // norm, projection
    // The output matrix: its own if untied; a tied head on another stage than the
    // embedding keeps a copy that is all-reduced with stage 0 (Megatron).
    if (!m.tied_embeddings || first_block > 0) n += vocab_shard;
  }
  return n;
}

std::int64_t block_activation_bytes(const ModelSpec& m, int block, int tp, int micro_batch_size,
                                    const TrainingOptions& o) {
  const double s = m.seq_len;
  const double b = micro_batch_size;
  const double h = m.hidden;
  const double t = tp;
  const double sbh = s * b * h;
  const double sp_div = o.sequence_parallel ? t : 1.0;
  if (block == 0) return static_cast<i64>(3.0 * sbh / sp_div);  // output + dropout mask
  if (block == m.num_layers + 1) return static_cast<i64>(2.0 * sbh / sp_div);  // final norm input
  if (o.recompute == Recompute::kFull) return static_cast<i64>(2.0 * sbh / sp_div);  // layer input
  // Korthikanti et al. 2022, generalised to GQA and any FFN width (equals 10 + 24/t for
  // MHA with ffn = 4h): replicated 10 sbh (LN inputs, residual dropout masks, QKV and MLP
  // inputs), TP-split Q,K,V + projection input and the MLP's inner activations.
  const double r = static_cast<double>(m.effective_kv_heads()) / m.heads;
  const double mlp = m.family == ModelFamily::kGpt ? 4.0 * m.ffn_hidden / h : 8.0 * m.ffn_hidden / h;
  const double split = 4.0 + 4.0 * r + mlp;
  const double linear = sbh * (10.0 / sp_div + split / t);
  if (o.recompute == Recompute::kSelective) return static_cast<i64>(linear);
  const double scores = 5.0 * m.heads * s * s * b / t;  // softmax out 2 + mask 1 + dropout out 2
  return static_cast<i64>(linear + scores);
}

MemoryBreakdown stage_memory(const ModelSpec& m, const StageShape& sh, const MemoryModelConstants& c) {
  MemoryBreakdown out;
  const TrainingOptions& o = sh.options;
  const double params = static_cast<double>(stage_params_per_rank(m, sh.first_block, sh.last_block, sh.tp));
  const StaticBytes per = static_bytes_per_param(o);
  const double dp = std::max(1, sh.dp);
  out.weights_bytes = static_cast<i64>(params * per.weights / (o.zero_stage >= 3 ? dp : 1.0));
  out.grads_bytes = static_cast<i64>(params * per.grads / (o.zero_stage >= 2 ? dp : 1.0));
  out.optimizer_bytes = static_cast<i64>(params * per.optimizer / (o.zero_stage >= 1 ? dp : 1.0));

  // Activations: layers are identical, so count them instead of looping.
  const int head_block = m.num_layers + 1;
  const int layers_lo = std::max(sh.first_block, 1);
  const int layers_hi = std::min(sh.last_block, head_block);
  const i64 nlayers = std::max(0, layers_hi - layers_lo);
  i64 per_micro = nlayers * block_activation_bytes(m, 1, sh.tp, sh.micro_batch_size, o);
  if (sh.first_block == 0) per_micro += block_activation_bytes(m, 0, sh.tp, sh.micro_batch_size, o);
  const bool has_head = sh.last_block > head_block;
  if (has_head) per_micro += block_activation_bytes(m, head_block, sh.tp, sh.micro_batch_size, o);
  out.activations_bytes = per_micro * std::max(1, sh.in_flight_micro_batches);

  // Transients of one micro-batch: the logits on the last stage; under full recompute, one
  // layer's full activations while it is recomputed.
  double transient = 0;
  if (has_head) {
    transient += c.logits_bytes_per_element * m.seq_len * static_cast<double>(sh.micro_batch_size) *
                 m.vocab / sh.tp;
  }
  if (o.recompute == Recompute::kFull && nlayers > 0) {
    TrainingOptions none = o;
    none.recompute = Recompute::kNone;
    transient += static_cast<double>(block_activation_bytes(m, 1, sh.tp, sh.micro_batch_size, none));
  }
  out.transient_bytes = static_cast<i64>(transient);

  // p2p: a receive buffer from the previous stage and a send buffer to the next, fp16.
  const double boundary = 2.0 * m.seq_len * static_cast<double>(sh.micro_batch_size) * m.hidden /
                          (o.sequence_parallel ? sh.tp : 1);
  int links = 0;
  if (sh.first_block > 0) ++links;
  if (!has_head) ++links;
  out.comm_buffer_bytes = static_cast<i64>(boundary * links);

  out.overhead_bytes = static_cast<i64>(c.allocator_fraction *
                                        static_cast<double>(out.activations_bytes + out.transient_bytes));
  out.peak_bytes = out.weights_bytes + out.grads_bytes + out.optimizer_bytes + out.activations_bytes +
                   out.transient_bytes + out.comm_buffer_bytes + out.overhead_bytes;
  return out;
}

std::int64_t rank_peak_bytes(const MemoryBreakdown& stage, std::int64_t runtime_overhead_bytes) {
  return stage.peak_bytes + runtime_overhead_bytes;
}

const MemoryModelConstants& default_memory_constants() {
  static const MemoryModelConstants c{};
  return c;
}

}  // namespace flotilla::planner
