#include "planner/time_model.h"

#include <algorithm>

#include "planner/memory_model.h"

namespace flotilla::planner {

double p2p_bytes_per_rank(const ModelSpec& model, int micro_batch_size, int tp) {
  return 2.0 * model.seq_len * static_cast<double>(micro_batch_size) * model.hidden / std::max(1, tp);
}

int p2p_senders_per_node(int tp, int replicas_here, int gpus_per_node) {
  return std::max(1, std::min(std::max(1, tp) * std::max(1, replicas_here), gpus_per_node));
}

StageTiming stage_timing(const ModelSpec& model, const Stage& stage, const std::vector<const GpuType*>& replica_gpus,
                         int micro_batch_size, const TrainingOptions& options, const ComputeModel& compute,
                         const NetworkModel& network, LinkKind link_to_next, LinkKind dp_link) {
  StageTiming t;
  const GpuType* slowest = nullptr;
  for (const GpuType* gpu : replica_gpus) {
    if (gpu == nullptr) continue;
    const LayerTimes lt = compute.stage_times(model, *gpu, stage.first_block, stage.last_block, stage.tp, micro_batch_size);
    double bwd = lt.backward_s;
    if (options.recompute == Recompute::kFull) bwd += lt.forward_s;
    // Selective recompute re-runs only the attention core: Korthikanti et al. report 2-4 % extra
    // FLOPs for GPT-3-scale models; we charge 3 % of the forward.
    if (options.recompute == Recompute::kSelective) bwd += 0.03 * lt.forward_s;
    if (slowest == nullptr || lt.forward_s + bwd > t.forward_s + t.backward_s) slowest = gpu;
    t.forward_s = std::max(t.forward_s, lt.forward_s);
    t.backward_s = std::max(t.backward_s, bwd);
    t.update_s = std::max(t.update_s, lt.update_s);
  }
  if (slowest == nullptr) return t;
  const int gpus_per_node = std::max(1, std::min(stage.tp, slowest->gpus_per_node));
  if (stage.last_block <= model.num_layers + 1) {  // not the last stage: send activations on
    t.p2p_s = network.p2p_seconds(p2p_bytes_per_rank(model, micro_batch_size, stage.tp), link_to_next, *slowest,
                                  p2p_senders_per_node(stage.tp, stage.dp(), slowest->gpus_per_node));
  }
  // Gradients are reduced in fp32 (Megatron's main grads); ZeRO-1/2 reduce-scatter + all-gather
  // moves the same bytes as an all-reduce.
  const double grad_bytes = 4.0 * static_cast<double>(stage_params_per_rank(model, stage.first_block, stage.last_block, stage.tp));
  t.dp_sync_s = network.allreduce_seconds(grad_bytes, stage.dp(), dp_link, *slowest, gpus_per_node);
  return t;
}

double tied_embedding_sync_seconds(const ModelSpec& model, const NetworkModel& network, int num_stages, int tp,
                                   std::string_view first_zone, const GpuType& first_gpu,
                                   std::string_view last_zone, const GpuType& last_gpu, int senders_per_node) {
  if (!model.tied_embeddings || num_stages < 2) return 0;
  const int t = std::max(1, tp);
  const double bytes = 4.0 * static_cast<double>((head_matrix_params(model) + t - 1) / t);
  // Ring all-reduce of two: each rank sends and receives half the tensor, twice.
  const double chunk = bytes / 2;
  const double bw =
      network.pair_bandwidth_bytes_per_s(first_zone, first_gpu, last_zone, last_gpu, std::max(1, senders_per_node), chunk);
  return 2.0 * (network.latency_s + chunk / bw);
}

PipelineTime pipeline_iter_seconds(const std::vector<StageTiming>& stages, int num_micro_batches) {
  PipelineTime out;
  if (stages.empty()) return out;
  const int m = std::max(1, num_micro_batches);
  double fill = 0;        // one micro-batch through every stage and back (warm-up + cool-down)
  double straggler = 0;   // steady state: the slowest stage's cycle
  double sync = 0;
  double p2p_from_previous = 0;
  for (const StageTiming& s : stages) {
    const double own = s.forward_s + s.backward_s + 2.0 * s.p2p_s;
    fill += own;
    straggler = std::max(straggler, own + 2.0 * p2p_from_previous);
    p2p_from_previous = s.p2p_s;
    sync = std::max(sync, s.dp_sync_s + s.tied_sync_s + s.update_s);
  }
  out.pipeline_seconds = fill + (m - 1) * straggler;
  out.sync_seconds = sync;
  out.iter_seconds = out.pipeline_seconds + out.sync_seconds;
  return out;
}

}  // namespace flotilla::planner
