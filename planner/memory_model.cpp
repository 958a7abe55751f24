#include "planner/memory_model.h"

#include "common/reference_models.h"

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

double attention_score_bytes_per_element(const TrainingOptions& o) {
  // Fused (Korthikanti): softmax output 2 + dropout mask 1 + dropout output 2.
  double bytes = 5;
  if (!o.fused_softmax) bytes += 2;  // the saved probabilities are fp32 (4 B, not 2)
  if (o.op_level_activations) {
    bytes += 2;                         // the score op's fp16 output (the softmax op's input)
    if (!o.fused_softmax) bytes += 2;   // the softmax op's fp16 output (the dropout op's input)
  }
  return bytes;
}

double flash_softmax_stats_bytes(const ModelSpec& m, int tp, int micro_batch_size, const TrainingOptions& o) {
  if (!o.flash_attention) return 0;
  return 4.0 * m.heads * static_cast<double>(m.seq_len) * micro_batch_size / tp;
}

namespace {
// Per op of Aceso's GPT layer: (replicated s*b*h bytes, TP-split s*b*h bytes, bytes per
// attention-score element). Split terms generalise to GQA/FFN width as the fused count does.
struct OpBytes {
  double replicated_sbh, split_sbh, per_score;
};
OpBytes layer_op_bytes(const ModelSpec& m, int op, const TrainingOptions& o) {
  const double r = static_cast<double>(m.effective_kv_heads()) / m.heads;
  const double mlp = m.family == ModelFamily::kGpt ? 4.0 * m.ffn_hidden / m.hidden : 8.0 * m.ffn_hidden / m.hidden;
  switch (op) {
    case 0: return {2, 0, 0};                          // LN1 input
    case 1: return {0, 2 + 4 * r, 0};                  // Q, K, V
    case 2: return {0, 0, 2};                          // raw scores (the softmax op's input)
    case 3: return {0, 0, o.fused_softmax ? 2.0 : 6.0};  // probabilities (+ fp32 copy unfused)
    case 4: return {0, 0, 3};                          // dropout mask 1 + output 2
    case 5: return {0, 2, 0};                          // context (dense input)
    case 6: return {2, 0, 0};                          // dense output
    case 7: return {3, 0, 0};                          // residual dropout mask + sum
    case 8: return {2, 0, 0};                          // LN2 input
    case 9: return {0, mlp / 2, 0};                    // GEMM1 output (GeLU input)
    case 10: return {0, mlp / 2, 0};                   // GeLU output (GEMM2 input)
    case 11: return {2, 0, 0};                         // GEMM2 output
    default: return {3, 0, 0};                         // residual dropout mask + sum
  }
}
}  // namespace

std::int64_t layer_ops_activation_bytes(const ModelSpec& m, int first_op, int last_op, int tp,
                                        int micro_batch_size, const TrainingOptions& o) {
  const double sbh = static_cast<double>(m.seq_len) * micro_batch_size * m.hidden;
  const double scores = static_cast<double>(m.heads) * m.seq_len * m.seq_len * micro_batch_size / tp;
  const double sp_div = o.sequence_parallel ? tp : 1.0;
  double bytes = 0;
  for (int op = std::max(0, first_op); op < std::min(last_op, kOpsPerLayer); ++op) {
    const OpBytes b = layer_op_bytes(m, op, o);
    bytes += sbh * (b.replicated_sbh / sp_div + b.split_sbh / tp);
    // FlashAttention fuses score, softmax and dropout: only the softmax op keeps its statistics.
    if (!o.flash_attention) bytes += b.per_score * scores;
    else if (op == 3) bytes += flash_softmax_stats_bytes(m, tp, micro_batch_size, o);
  }
  return static_cast<i64>(bytes);
}

std::int64_t layer_ops_params_per_rank(const ModelSpec& m, int first_op, int last_op, int tp) {
  const i64 h = m.hidden;
  const i64 q = static_cast<i64>(m.heads) * m.head_dim;
  const i64 kv = static_cast<i64>(m.effective_kv_heads()) * m.head_dim;
  const i64 f = m.ffn_hidden;
  i64 n = 0;
  for (int op = std::max(0, first_op); op < std::min(last_op, kOpsPerLayer); ++op) {
    if (op == 0 || op == 8) n += 2 * h;                                    // LayerNorm
    if (op == 1) n += (h * (q + 2 * kv) + (q + 2 * kv) + tp - 1) / tp;    // QKV
    if (op == 6) n += (q * h + tp - 1) / tp + h;                          // dense + bias
    if (op == 9) n += (h * f + f + tp - 1) / tp;                          // GEMM1
    if (op == 11) n += (f * h + tp - 1) / tp + h;                         // GEMM2 + bias
  }
  return n;
}

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
  // The reference worker never recomputes; a recompute setting (which suggest.h tries on plans
  // that fit nowhere) is counted as Megatron's recomputing layers keep it, as before this count.
  if (o.reference_worker_activations && o.recompute == Recompute::kNone) {
    // fp32, no dropout: the embedding's and the final norm's outputs are one sbh of floats each.
    if (block == 0 || block == m.num_layers + 1) return static_cast<i64>(4.0 * sbh);
    return static_cast<i64>(4.0 * reference_block_activation_floats(b, s, h, m.ffn_hidden, m.heads));
  }
  if (block == 0) return static_cast<i64>(3.0 * sbh / sp_div);  // output + dropout mask
  if (block == m.num_layers + 1) return static_cast<i64>(2.0 * sbh / sp_div);  // final norm input
  if (o.recompute == Recompute::kFull) return static_cast<i64>(2.0 * sbh / sp_div);  // layer input
  // Korthikanti et al. 2022, generalised to GQA and any FFN width (equals 10 + 24/t for
  // MHA with ffn = 4h): replicated 10 sbh (LN inputs, residual dropout masks, QKV and MLP
  // inputs), TP-split Q,K,V + projection input and the MLP's inner activations.
  const double r = static_cast<double>(m.effective_kv_heads()) / m.heads;
  const double mlp = m.family == ModelFamily::kGpt ? 4.0 * m.ffn_hidden / h : 8.0 * m.ffn_hidden / h;
  const double split = 4.0 + 4.0 * r + mlp;
  // An op-level runtime also keeps the attention and MLP output projections (2 sbh each,
  // replicated: they follow the TP all-reduce), which fused layers free at once.
  const double replicated = o.op_level_activations ? 14.0 : 10.0;
  const double linear = sbh * (replicated / sp_div + split / t);
  if (o.recompute == Recompute::kSelective) return static_cast<i64>(linear);
  if (o.flash_attention) return static_cast<i64>(linear + flash_softmax_stats_bytes(m, tp, micro_batch_size, o));
  return static_cast<i64>(linear + attention_score_bytes_per_element(o) * m.heads * s * s * b / t);
}

MemoryBreakdown stage_memory(const ModelSpec& m, const StageShape& sh, const MemoryModelConstants& c) {
  MemoryBreakdown out;
  const TrainingOptions& o = sh.options;
  const int tail_ops = std::clamp(sh.tail_ops_of_previous_layer, 0, kOpsPerLayer);
  const int head_ops = std::clamp(sh.head_ops_of_next_layer, 0, kOpsPerLayer);
  const double params = static_cast<double>(
      stage_params_per_rank(m, sh.first_block, sh.last_block, sh.tp) +
      layer_ops_params_per_rank(m, kOpsPerLayer - tail_ops, kOpsPerLayer, sh.tp) +
      layer_ops_params_per_rank(m, 0, head_ops, sh.tp));
  const StaticBytes per = static_bytes_per_param(o);
  const double dp = std::max(1, sh.dp);
  out.weights_bytes = static_cast<i64>(params * per.weights / (o.zero_stage >= 3 ? dp : 1.0));
  out.grads_bytes = static_cast<i64>(params * per.grads / (o.zero_stage >= 2 ? dp : 1.0));
  out.optimizer_bytes = static_cast<i64>(params * per.optimizer / (o.zero_stage >= 1 ? dp : 1.0));
  // The reference worker's AdamW keeps a byte of weight-decay mask per parameter.
  if (o.reference_worker_activations) out.optimizer_bytes += static_cast<i64>(params);

  // Activations: layers are identical, so count them instead of looping.
  const int head_block = m.num_layers + 1;
  const int layers_lo = std::max(sh.first_block, 1);
  const int layers_hi = std::min(sh.last_block, head_block);
  const i64 nlayers = std::max(0, layers_hi - layers_lo);
  i64 per_micro = nlayers * block_activation_bytes(m, 1, sh.tp, sh.micro_batch_size, o);
  if (sh.first_block == 0) per_micro += block_activation_bytes(m, 0, sh.tp, sh.micro_batch_size, o);
  const bool has_head = sh.last_block > head_block;
  if (has_head) per_micro += block_activation_bytes(m, head_block, sh.tp, sh.micro_batch_size, o);
  per_micro += layer_ops_activation_bytes(m, kOpsPerLayer - tail_ops, kOpsPerLayer, sh.tp, sh.micro_batch_size, o) +
               layer_ops_activation_bytes(m, 0, head_ops, sh.tp, sh.micro_batch_size, o);
  out.activations_bytes = per_micro * std::max(1, sh.in_flight_micro_batches);

  // Transients of one micro-batch: the logits on the last stage; under full recompute, one
  // layer's full activations while it is recomputed.
  double transient = 0;
  if (has_head) {
    // An op-level runtime's head op keeps one fp32 softmax of the logits (4 B per element,
    // Aceso's op profile) and frees the rest inside the op; fused Megatron holds more
    // (fp16 logits, fp32 copy, gradient: the calibrated constant).
    const double logits_bytes = o.op_level_activations ? 4.0 : c.logits_bytes_per_element;
    transient += logits_bytes * m.seq_len * static_cast<double>(sh.micro_batch_size) *
                 m.vocab / sh.tp;
  }
  // The reference worker's backward of a block holds gradients of each saved activation while it
  // runs: about one more block's activations.
  if (o.reference_worker_activations && o.recompute == Recompute::kNone && nlayers > 0)
    transient += static_cast<double>(block_activation_bytes(m, 1, sh.tp, sh.micro_batch_size, o));
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
