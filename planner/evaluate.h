// Whole-plan evaluation: per-rank peak memory, per-stage times, iteration time, throughput, cost.
//
// Guarantees: evaluate() reports every rank's peak bytes (never an average), each stage's
//   timing, iter_seconds, tokens_per_second and usd_per_iteration, and when the plan cannot run
//   a typed Infeasibility (the first problem found: invalid plan, unknown GPU, or OOM with the
//   rank, stage, peak and capacity). It is pure and deterministic.
// Assumes: the catalog names every GPU in the plan; profiles may be absent (FLOP estimate).
// Caveats: an OOM plan still gets times and memory filled in so a user sees by how much.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/gpu_catalog.h"
#include "planner/memory_model.h"
#include "planner/runtime_overhead.h"
#include "planner/model_spec.h"
#include "planner/network.h"
#include "planner/plan.h"
#include "planner/profile.h"
#include "planner/time_model.h"

namespace flotilla::planner {

struct EvalContext {
  const GpuCatalog* catalog = nullptr;
  const ComputeModel* compute = nullptr;
  const NetworkModel* network = nullptr;
  MemoryModelConstants memory_constants = default_memory_constants();
};

enum class InfeasibleKind { kInvalidPlan, kUnknownGpu, kOutOfMemory };

struct Infeasibility {
  InfeasibleKind kind = InfeasibleKind::kInvalidPlan;
  int stage = -1;
  int rank = -1;
  std::int64_t peak_bytes = 0;
  std::int64_t capacity_bytes = 0;
  std::string message;  // one line, e.g. "OOM on rank 5 (stage 1, A100-40): peak 41.2 GB > 40.0 GB"
};

struct RankReport {
  int rank = 0;      // global: stage-major, then replica, then TP rank
  int stage = 0;
  int replica = 0;
  int tp_rank = 0;
  std::string gpu_type;
  std::string zone;
  MemoryBreakdown memory;  // overhead_bytes = allocator fragmentation + runtime.total_bytes()
  std::int64_t capacity_bytes = 0;
  RuntimeOverhead runtime;  // CUDA context, NCCL buffers, cuBLAS workspace of this rank
};

struct StageReport {
  int stage = 0;
  int first_block = 0;
  int last_block = 0;
  int tp = 1;
  int dp = 1;
  int in_flight_micro_batches = 1;  // 1F1B: activations this stage holds at its peak
  std::int64_t peak_bytes = 0;  // per rank of this stage
  StageTiming timing;
};

struct Evaluation {
  std::vector<RankReport> ranks;
  std::vector<StageReport> stages;
  std::int64_t peak_bytes_max = 0;
  int num_micro_batches = 0;  // per pipeline per iteration
  double iter_seconds = 0;
  double pipeline_seconds = 0;
  double sync_seconds = 0;
  double tokens_per_second = 0;
  double usd_per_iteration = 0;        // compute + network
  double usd_compute_per_iteration = 0;
  double usd_network_per_iteration = 0;
  std::optional<Infeasibility> infeasible;

  bool feasible() const { return !infeasible.has_value(); }
};

Evaluation evaluate(const Plan& plan, const ModelSpec& model, const EvalContext& context);

}  // namespace flotilla::planner
