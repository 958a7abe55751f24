// Iteration time of a 1F1B pipeline with (possibly heterogeneous) DP replicas.
//
// Guarantees: stage_timing() is the per-stage building block (slowest replica of the stage);
//   pipeline_iter_seconds() composes stages: warm-up + (m - 1) steady-state steps driven by
//   the slowest stage + cool-down, then the DP gradient sync and optimizer step of the slowest
//   stage. Both are O(stages) or O(blocks of the stage) and allocation-free.
// Assumes (Sailor §4.3): per micro-batch, stage s costs fwd_s + bwd_s (+ TP all-reduces, which
//   are inside the profiled times) and sends activations of mbs*s*h*2 bytes to stage s+1 over
//   the link between them, split over its TP ranks (p2p_bytes_per_rank()); Megatron's p2p is
//   synchronous, so a stage is busy for the transfers on both of its pipeline boundaries;
//   gradient all-reduce is a ring over the stage's DP replicas, the slowest link bounding it;
//   the update runs after the all-reduce.
// Caveats: no overlap of the DP all-reduce with the backward pass (Megatron's default without
//   --overlap-grad-reduce), which is what Sailor's validation runs used.
#pragma once

#include <string_view>
#include <vector>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"
#include "planner/network.h"
#include "planner/plan.h"
#include "planner/profile.h"

namespace flotilla::planner {

// Bytes each TP rank of a stage sends to the next stage per micro-batch: the fp16 activations
// (2 * seq * mbs * hidden) split evenly over the stage's `tp` ranks. Megatron-LM and
// Megatron-DeepSpeed scatter the tensor over the TP group before the send and all-gather it
// after (`scatter_gather_tensors_in_pipeline`, on by default; DeepSpeed's pipeline engine
// partitions it the same way, and with sequence parallelism it is already split), so the
// tp ranks of a node together move one copy of the tensor, not tp copies.
double p2p_bytes_per_rank(const ModelSpec& model, int micro_batch_size, int tp);

// Ranks of one node that send to the next stage at once: Megatron orders ranks TP, then DP, so
// a stage's `replicas_here` replicas of one GPU type and zone fill nodes contiguously, and
// every pipeline sends in the same 1F1B step: min(GPUs per node, tp x replicas_here) share
// the node's link. (TP 1 x DP 8 on an 8-GPU node: 8 senders, not 1.)
int p2p_senders_per_node(int tp, int replicas_here, int gpus_per_node);

struct StageTiming {
  double forward_s = 0;   // one micro-batch, slowest replica
  double backward_s = 0;  // one micro-batch, slowest replica (incl. recompute)
  double p2p_s = 0;       // send of one micro-batch's activations to the next stage (0 last);
                          // the gradient comes back over the same link in the same time
  double dp_sync_s = 0;   // gradient all-reduce over the stage's replicas
  double update_s = 0;    // optimizer step
  double tied_sync_s = 0; // first and last stage only: the tied word-embedding all-reduce
};

// Time of one stage; `replica_gpus` are the catalog entries of the stage's replicas.
StageTiming stage_timing(const ModelSpec& model, const Stage& stage,
                         const std::vector<const GpuType*>& replica_gpus, int micro_batch_size,
                         const TrainingOptions& options, const ComputeModel& compute,
                         const NetworkModel& network, LinkKind link_to_next, LinkKind dp_link);

// Megatron ties the input word embeddings to the LM head. With the head on another stage than
// the embedding (PP > 1), the first and last stage keep a copy each and all-reduce its fp32
// gradient (one vocab shard per TP rank) after the DP all-reduce, before the optimizer step
// (`_allreduce_embedding_grads`; Megatron's timer "backward-embedding-all-reduce": 5-7 ms on
// stage 0 of the shared GH200 megatron-runs with PP > 1, 0.3 ms at PP 1). Two participants per
// TP rank; every pipeline does it at once, so `senders_per_node` is p2p_senders_per_node() of
// stage 0; over the link between the two stages' nodes (Sailor's pair fit where one exists).
// 0 for untied models and PP 1.
double tied_embedding_sync_seconds(const ModelSpec& model, const NetworkModel& network, int num_stages, int tp,
                                   std::string_view first_zone, const GpuType& first_gpu,
                                   std::string_view last_zone, const GpuType& last_gpu, int senders_per_node);

struct PipelineTime {
  double iter_seconds = 0;
  double pipeline_seconds = 0;  // warm-up + steady + cool-down
  double sync_seconds = 0;      // DP all-reduce + update (slowest stage)
};

// sync = max_s (dp_sync_s + tied_sync_s + update_s).
// fill = sum_s (f_s + b_s + 2 p2p_s): one micro-batch forward through every stage and back;
// steady state (m - 1) x max_s cycle_s, cycle_s = f_s + b_s + 2 p2p_(s-1) + 2 p2p_s: Megatron
// synchronises after every send/receive, so a stage cannot compute while the activations or
// gradients of either of its boundaries are in flight.
PipelineTime pipeline_iter_seconds(const std::vector<StageTiming>& stages, int num_micro_batches);

}  // namespace flotilla::planner
