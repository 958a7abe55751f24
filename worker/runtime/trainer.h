// One rank of a training job: pipeline stage x data-parallel replica, driven step by step.
//
// Guarantees (CPU backend):
//   - The loss of every step, and every weight after it, is bit-identical for any layout of
//     the same job (PP, partition, DP dividing V), including across stops and resumes:
//       * samples and micro-batches depend only on (seed, step) (data_loader.h);
//       * each stage runs 1F1B, whose backwards run in micro-batch order, so a unit's grads
//         for one virtual shard accumulate its micro-batches in the same order everywhere;
//       * per-shard grads are summed in shard order 0..V-1 by the DP root of each stage,
//         whatever DP degree holds the shards, then broadcast to the replicas;
//       * the clip norm adds per-unit sums of squares in unit order on rank 0 (optimizer.h);
//       * the step loss adds per-micro-batch losses in global micro-batch order on rank 0.
//   - Each step ends with a control round trip to rank 0, which ORs every rank's stop flag
//     (SIGTERM) and broadcasts the decision, so all ranks stop after the same step, write a
//     coordinated checkpoint and return 0.
//   - Checkpoints: the DP-root of each stage writes its units; rank 0 writes meta.json and DONE
//     after every other writer reported, then prunes to the last K.
// Assumes: every rank gets the same JobOptions; RANK/WORLD_SIZE agree with --pp x --dp.
//   - Tensors (activations, activation gradients, the DP shard-sum chain) go over NCCL when
//     --comm resolves to nccl (CUDA backend, see nccl_communicator.h), else over the TCP
//     transport; the DP sum is the same left fold either way. Control messages and
//     checkpoint coordination always use TCP.
//   - Every wait on a peer is bounded by --recv-timeout; errors carry the step number.
//   - Rank 0 rewrites <checkpoint-dir>/run_summary.json after every step (run_summary.h), so
//     the launcher can say how far the run got even when a rank was killed.
// Caveats: the CUDA backend runs the same schedule but is not bit-identical to the CPU one.
#pragma once

#include "worker/launch/resume_check.h"
#include "worker/runtime/job_options.h"
#include "worker/runtime/tcp_transport.h"

namespace flotilla::worker {

// Returns the process exit code; throws std::runtime_error with a one-line message on bad
// input (data file, checkpoint) or a failed peer.
int run_rank(const JobOptions& options, const RendezvousConfig& rendezvous);

// What a checkpoint of this job must match to resume it: meta.json's "model" and "training"
// sections as this trainer writes them, and the unit count (worker/launch/resume_check.h).
ResumeIdentity resume_identity(const JobOptions& options);

}  // namespace flotilla::worker
