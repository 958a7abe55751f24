// Iteration time of a 1F1B pipeline with (possibly heterogeneous) DP replicas.
//
// Guarantees: stage_timing() is the per-stage building block (slowest replica of the stage);
//   pipeline_iter_seconds() composes stages: warm-up + (m - 1) steady-state steps driven by
//   the slowest stage + cool-down, then the DP gradient sync and optimizer step of the slowest
//   stage. Both are O(stages) or O(blocks of the stage) and allocation-free.
// Assumes (Sailor §4.3): per micro-batch, stage s costs fwd_s + bwd_s (+ TP all-reduces, which
//   are inside the profiled times) and sends activations of mbs*s*h*2 bytes to stage s+1 over
//   the link between them; gradient all-reduce is a ring over the stage's DP replicas, the
//   slowest link bounding it; the update runs after the all-reduce.
// Caveats: no overlap of the DP all-reduce with the backward pass (Megatron's default without
//   --overlap-grad-reduce), which is what Sailor's validation runs used.
#pragma once

#include <vector>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"
#include "planner/network.h"
#include "planner/plan.h"
#include "planner/profile.h"

namespace flotilla::planner {

struct StageTiming {
  double forward_s = 0;   // one micro-batch, slowest replica
  double backward_s = 0;  // one micro-batch, slowest replica (incl. recompute)
  double p2p_s = 0;       // send of one micro-batch's activations to the next stage (0 last)
  double dp_sync_s = 0;   // gradient all-reduce over the stage's replicas
  double update_s = 0;    // optimizer step
};

// Time of one stage; `replica_gpus` are the catalog entries of the stage's replicas.
StageTiming stage_timing(const ModelSpec& model, const Stage& stage,
                         const std::vector<const GpuType*>& replica_gpus, int micro_batch_size,
                         const TrainingOptions& options, const ComputeModel& compute,
                         const NetworkModel& network, LinkKind link_to_next, LinkKind dp_link);

struct PipelineTime {
  double iter_seconds = 0;
  double pipeline_seconds = 0;  // warm-up + steady + cool-down
  double sync_seconds = 0;      // DP all-reduce + update (slowest stage)
};

PipelineTime pipeline_iter_seconds(const std::vector<StageTiming>& stages, int num_micro_batches);

}  // namespace flotilla::planner
