// Configuration filtering for scale tables (FlexTrain §4.4.4).
//
// Candidates (the best layout per GPU count above the job's initial count) are traversed in
// ascending GPU count. A candidate is dropped if
//   (1) trend: the simulation-based and the modeling-based speedups move in different
//       directions relative to their respective previous candidate's values;
//   (2) discrepancy: |S_sim − S_model| / S_model > max_relative_discrepancy;
//   (3) marginal: S_sim < (1 + min_marginal_gain) · S_sim of the last kept entry.
// The initial layout (speedup 1 under both predictors) is the starting "previous" and "last
// kept" point.
// Guarantees: pure; every dropped candidate carries the rule that dropped it; kept speedups are
//   strictly increasing when min_marginal_gain > 0 (the default; at 0 equal speedups pass rule 3).
// Caveats: "previous result" in rule (1) is the previous candidate evaluated (kept or not), which
//   is how we read "relative to their respective previous results".
#pragma once

#include <string>
#include <vector>

#include "scaler/parallel_config.h"

namespace flotilla::scaler {

struct ScaleCandidate {
  int gpus = 0;
  ParallelConfig config;
  double iteration_s = 0;           // simulation-based predictor
  double modeled_iteration_s = 0;   // FlexTrain eq. 5/6
  double speedup = 1;               // vs the initial layout, simulation-based
  double modeled_speedup = 1;       // vs the initial layout, eq. 5/6
};

struct ScaleFilterParams {
  double max_relative_discrepancy = 0.25;
  double min_marginal_gain = 0.05;
};

struct RejectedCandidate {
  ScaleCandidate candidate;
  std::string reason;  // "trend", "discrepancy" or "marginal", plus numbers
};

struct FilteredCandidates {
  std::vector<ScaleCandidate> kept;
  std::vector<RejectedCandidate> rejected;
};

FilteredCandidates filter_scale_candidates(const std::vector<ScaleCandidate>& ascending,
                                           const ScaleFilterParams& params = {});

}  // namespace flotilla::scaler
