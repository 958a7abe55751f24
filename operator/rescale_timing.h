// The phases of a rescale, timed from two successive statuses of one TrainingJob: what the
// operator observes into flotilla_rescale_duration_seconds{phase}.
//
// Guarantees (pure: the clock comes in as now_s):
//   - drain:   status.lastRescaleTime (the new epoch's plan) until the barrier is lifted
//              (every old worker stopped at its checkpoint);
//   - restart: the barrier lifted until every pod reports Running under the epoch;
//   - total:   status.lastRescaleTime until Running.
//   Only rescales count (phase Rescaling before Running), not the first admission, and each
//   phase is reported once: on the status write that makes the transition.
// Assumes: `before` is the status the reconcile read, `after` the status it wrote.
// Caveats: restart needs the lift time of this process (RescaleClock); after an operator restart
//   mid-rescale only drain and total are observed.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

struct RescaleTiming {
  std::vector<std::pair<std::string, double>> observations;  // (phase, seconds)
  bool barrier_lifted = false;                                // remember now_s as the lift time
};

// lifted_at_s: when this job's barrier was lifted for the current epoch (0: unknown).
RescaleTiming time_rescale(const nlohmann::json& before, const nlohmann::json& after, double now_s,
                           double lifted_at_s);

// Seconds since status.lastRescaleTime of a job in phase Rescaling, else 0 (the stuck-rescale gauge).
double rescaling_age_seconds(const nlohmann::json& status, double now_s);

}  // namespace flotilla::op
