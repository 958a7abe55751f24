// Memory headroom learned from a job's own workers: when the planner under-predicts a GPU
// type's peak memory (issue 13: up to 28 % on consumer GPUs; or a catalog that overstates a
// GPU's memory), the workers say so, by running out of memory or by measuring more than was
// predicted, and the job's next plans keep that much more free on every rank of that type.
//
// Guarantees (pure, deterministic):
//   - is_out_of_memory(): true for the out-of-GPU-memory lines the reference worker and
//     PyTorch/CUDA print ("out of GPU memory", "CUDA out of memory", torch's
//     OutOfMemoryError, "CUDA error: out of memory"); false for host memory.
//   - A stage's prediction P carries the headroom its type had when it was planned
//     (PlanStage::headroom_bytes, E_p); raw = P − E_p is the model's own prediction. A pod's
//     prediction is that of the largest stage it runs ranks of.
//   - after_out_of_memory(): a pod of type T ran out of memory on capacity C (the catalog's). Its
//     raw prediction was too small by at least C − raw. The new E_T' = max(E_T, C − 0.9·raw): the
//     plan that failed, and any whose raw prediction on T is within 10 % of it, no longer fits;
//     since raw + E_p ≤ C, E_T' ≥ E_p + 0.1·raw: every OOM takes a tenth of the failed rank's
//     raw need off what T may hold, and the re-plan cannot be the plan that failed. Where the
//     worker's line says what the GPU offered, U (usable_bytes_in()), raw is replaced by
//     min(raw, U): a GPU that offers far less than the catalog says is learned in one OOM.
//   - after_measured_peak(): a pod that measured M > P keeps E_T' = M − raw (the headroom that
//     would have predicted M), taken only when that exceeds E_T by 1 % of C or more (a step's
//     noise does not re-plan the job; nor does a peak the current E_T already covers).
//   - Headroom never shrinks during a job's life (the evidence stays true) and lives in
//     status.memoryHeadroom, so a restarted operator plans with it.
//   - with_headroom() adds E_T to GpuType::cuda_context_bytes of each type: the planner's
//     memory model adds that term once per rank (planner/runtime_overhead.h), so every
//     prediction, search and evaluate of the job carries it; other types are untouched.
// Assumes: the plan's stages carry the predicted peak the job was launched with and the
//   headroom in it (JobPlan::stages[].predicted_peak_bytes, headroom_bytes); the catalog is the
//   operator's (before headroom).
// Caveats: the evidence is per GPU type, not per rank: a stage that holds more than its type's
//   others (the first stage's in-flight activations) sets the type's headroom for all of them,
//   which errs on the safe side. An OOM caused by another process on the GPU is learned as if
//   the model needed it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/pod_plan.h"
#include "operator/job_plan.h"
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"

namespace flotilla::op {

struct TypeHeadroom {
  std::string gpu_type;
  std::int64_t bytes = 0;  // added to every rank's predicted peak on this type
  std::string reason;      // OutOfMemory or MeasuredAbovePrediction
  std::string message;     // the evidence, one line
  std::int64_t epoch = 0;  // the plan epoch the evidence came from
};

struct MemoryHeadroom {
  std::vector<TypeHeadroom> types;  // one per GPU type, by name

  std::int64_t bytes_for(const std::string& gpu_type) const;
  const TypeHeadroom* find(const std::string& gpu_type) const;
  void set(TypeHeadroom type);  // replaces the entry of its type
  bool empty() const { return types.empty(); }
  std::string signature() const;  // "emu-small=1234,..." (types and bytes): a table key
  std::string summary() const;    // "emu-small 1.23 MB, A100-40 2 GB": for a person

  static MemoryHeadroom from_status(const nlohmann::json& status);  // status.memoryHeadroom
  nlohmann::json to_status() const;
};

bool is_out_of_memory(const std::string& worker_message);

// The bytes a worker's out-of-memory line says its GPU offered the process; nullopt when it does
// not say. Read from: the reference worker's "usable GPU memory N bytes" (worker/model/backend.h);
// PyTorch 2.x's "of which F is free. Including non-PyTorch memory, this process has H memory in
// use." (F + H); PyTorch 1.x's "F free; R reserved in total by PyTorch" (F + R).
std::optional<std::int64_t> usable_bytes_in(const std::string& worker_message);

// The headroom after `pod` of `plan` ran out of memory with `worker_message`; nullopt when the
// pod is not in the plan or its type is not in `catalog`.
std::optional<TypeHeadroom> after_out_of_memory(const JobPlan& plan, const std::string& pod,
                                                const std::string& worker_message, const MemoryHeadroom& before,
                                                const planner::GpuCatalog& catalog);

// The headroom after `pod` measured `measured_peak_bytes`; nullopt when that changes nothing.
std::optional<TypeHeadroom> after_measured_peak(const JobPlan& plan, const std::string& pod,
                                                std::int64_t measured_peak_bytes, const MemoryHeadroom& before,
                                                const planner::GpuCatalog& catalog);

// `catalog` with each type's headroom added to its cuda_context_bytes.
planner::GpuCatalog with_headroom(const planner::GpuCatalog& catalog, const MemoryHeadroom& headroom);

// "4.6 MB", "12.3 GB": three significant digits, decimal units.
std::string bytes_text(std::int64_t bytes);

}  // namespace flotilla::op
