// Memory headroom learned from a job's own workers: when the planner under-predicts a GPU
// type's peak memory (issue 13: up to 28 % on consumer GPUs; or a catalog that overstates a
// GPU's memory), the workers say so, by running out of memory or by measuring more than was
// predicted, and the job's next plans keep that much more free on every rank of that type.
//
// Guarantees (pure, deterministic):
//   - An OOM is a failure line common/out_of_memory.h recognises (is_out_of_memory()).
//   - A pod's prediction P (JobPlan::predicted_for(): its own ranks' largest peak, on its GPU
//     type) carries the headroom its type had when it was planned (E_p); raw = P − E_p is the
//     model's own prediction.
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
//   - Headroom never shrinks while the job trains the same model with the same worker kind (the
//     evidence stays true; headroom_key()) and lives in status.memoryHeadroom, so a restarted
//     operator plans with it. A user clears it by patching the status (docs/operator.md).
//   - with_headroom() adds E_T to GpuType::cuda_context_bytes of each type: the planner's
//     memory model adds that term once per rank (planner/runtime_overhead.h), so every
//     prediction, search and evaluate of the job carries it; other types are untouched.
// Assumes: the plan's pods (or, in a status written before per-pod predictions, its stages)
//   carry the predicted peak the job was launched with and the headroom in it; the catalog is the
//   operator's (before headroom).
// Caveats: the evidence is per GPU type, not per rank or node: a pod that holds more than its
//   type's others (the first stage's in-flight activations), or one node whose GPUs another
//   process shares, sets the type's headroom for all of them, which errs on the safe side and
//   may leave that type's healthy nodes unused by the job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/out_of_memory.h"
#include "common/pod_plan.h"
#include "operator/job_plan.h"
#include "operator/job_spec.h"
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"

namespace flotilla::op {

struct TypeHeadroom {
  std::string gpu_type;
  std::int64_t bytes = 0;  // added to every rank's predicted peak on this type
  std::string reason;      // OutOfMemory or MeasuredAbovePrediction
  std::string message;     // the evidence, one line
  std::int64_t epoch = 0;  // the plan epoch the evidence came from
  std::string model;       // headroom_key() of the job it was learned for
};

struct MemoryHeadroom {
  std::vector<TypeHeadroom> types;  // one per GPU type, by name

  std::int64_t bytes_for(const std::string& gpu_type) const;
  const TypeHeadroom* find(const std::string& gpu_type) const;
  void set(TypeHeadroom type);  // replaces the entry of its type
  bool empty() const { return types.empty(); }
  std::string signature() const;  // "emu-small=1234,..." (types and bytes): a table key
  std::string summary() const;    // "emu-small 1.23 MB, A100-40 2 GB": for a person
  // Drops what was learned for another model or worker kind (the spec changed it); true if any.
  bool keep_only(const std::string& model_key);

  static MemoryHeadroom from_status(const nlohmann::json& status);  // status.memoryHeadroom
  nlohmann::json to_status() const;
};

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

// What a job's headroom holds for: its model (preset name or inline shape) and worker kind. A
// spec that changes either starts with no headroom; other fields (GPU counts, steps) keep it.
std::string headroom_key(const JobSpec& spec);

// `catalog` with each type's headroom added to its cuda_context_bytes.
planner::GpuCatalog with_headroom(const planner::GpuCatalog& catalog, const MemoryHeadroom& headroom);

// "4.6 MB", "12.3 GB": three significant digits, decimal units.
std::string bytes_text(std::int64_t bytes);

}  // namespace flotilla::op
