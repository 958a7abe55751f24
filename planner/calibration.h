// Fitting each GPU type's compute efficiency (achieved / peak) to measured profiles.
//
// Guarantees: fit_compute_efficiency() uses every profile of every model it knows (presets by
//   name/alias) for the given GPU type: per (model, TP) the per-sample slope of the profile's
//   linear fit for a transformer layer (fit_profile()) gives achieved FLOP/s; the efficiency is
//   their geometric mean, fitted once per GPU type, never per run. It also reports how far the
//   resulting FLOP estimate is from every raw profile entry.
// Assumes: profiles were taken at sequence length seq_len; 0 (the default) means each preset's
//   own (2048 for OPT/GPT-Neo; 8192 for Llama-3-8B, whose profiles imply an implausible 1-2 %
//   of peak if read as 2048-token samples).
// Caveats: the FLOP estimate has no launch floor, so it under-estimates small micro-batches;
//   the errors are reported for all entries and for mbs >= 8 separately.
//
// fit_memory_overheads() fits the memory model's two run-fitted constants, the allocator's
//   fragmentation fraction (MemoryModelConstants::allocator_fraction) and each GPU type's CUDA
//   context (GpuType::cuda_context_bytes), jointly by least squares on the relative error over
//   the given runs' worst ranks, constrained so that no run is under-predicted by more than a
//   bound (a planner that under-predicts launches plans that run out of memory). Runs that measure allocated/reserved bytes only (no context:
//   sample gpu empty) inform the fraction alone. A GPU type with fewer than min_runs_per_gpu
//   runs gets no context (never a constant fitted to one run); the caller says what it uses
//   instead. Used by CalibrationMemory (the catalog matches the fit) and bench/planner_accuracy
//   (leave-one-group-out).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/profile.h"

namespace flotilla::planner {

struct EfficiencyFit {
  std::string gpu;
  double efficiency = 0;
  int entries = 0;                 // raw (model, mbs, tp) entries compared
  double mean_rel_error = 0;       // |estimate - measured| / measured, all entries
  double max_rel_error = 0;
  double mean_rel_error_mbs8 = 0;  // entries with mbs >= 8
};

// One fit per GPU type that has profiles of a known model; `catalog` supplies peak TFLOP/s.
std::vector<EfficiencyFit> fit_compute_efficiency(const ProfileSet& profiles, const GpuCatalog& catalog,
                                                  int seq_len = 0);

// One measured run's worst rank, split into what the two fitted constants act on.
struct MemoryFitSample {
  std::string group;            // the run's group (cluster, GPU type, model), e.g. "clariden/OPT-350"
  std::string gpu;              // the GPU type whose context the measurement includes; empty: none
  double measured_bytes = 0;
  double modelled_bytes = 0;    // tensors + NCCL buffers + cuBLAS workspace: no context, no fragmentation
  double dynamic_bytes = 0;     // activations + transients: what the fragmentation fraction scales
};

struct MemoryOverheadFit {
  double allocator_fraction = 0;
  std::map<std::string, double> cuda_context_bytes;  // by GPU type, only types with enough runs
  int samples = 0;
};

// Least squares subject to no fitted run being under-predicted by more than
// max_under_prediction (the safety target is 5 %; the default keeps a point of margin).
MemoryOverheadFit fit_memory_overheads(const std::vector<MemoryFitSample>& samples, int min_runs_per_gpu = 3,
                                       double max_under_prediction = 0.04);

// The sample's predicted bytes under a fit; a GPU type the fit has no context for uses
// `fallback_context_bytes` (the catalog's default).
double predicted_bytes(const MemoryFitSample& sample, const MemoryOverheadFit& fit, double fallback_context_bytes);

// The worst rank of an evaluated plan as a fit sample (its GPU's context and the allocator
// fraction taken out of the evaluation's peak, RankReport::runtime and ::memory).
MemoryFitSample memory_fit_sample(const Evaluation& ev, double measured_bytes, std::string group);

}  // namespace flotilla::planner
