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
#pragma once

#include <string>
#include <vector>

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

}  // namespace flotilla::planner
