// The scaling decisions a TrainingJob's status keeps: status.lastDecision (the newest) and
// status.recentDecisions (the newest kRecentDecisions, oldest first). A reader that polls (the
// demo's observer, a user's script, `kubectl get -o json`) sees every decision even when the
// next one replaces lastDecision within its poll interval (a preemption followed at once by the
// refused scale-up of the next pass).
//
// ScalingDecision is the one place the entry's JSON schema lives: the operator writes it
// (job_reconciler.cpp) and the demo observer reads it back through the same to_json/from_json.
//
// Guarantees: record_decision() sets lastDecision to `decision` and appends it to
//   recentDecisions, dropping the oldest beyond kRecentDecisions; a decision equal to the newest
//   in all but its time (a reconcile repeating itself) refreshes lastDecision without a new
//   entry, so repetition cannot push older decisions out. recent_decisions() returns
//   recentDecisions, or lastDecision alone for a status written before the history existed, or
//   nothing. from_json(to_json(d)) == d for every d (an infinite required idle time is written
//   as -1, JSON having no infinity, and read back as infinity).
// Assumes: nothing of the caller; entries that are not objects are skipped.
// Caveats: entries are never edited once appended; a field missing from a stored entry reads as
//   its default (0, "", no benefit check).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

inline constexpr std::size_t kRecentDecisions = 8;

// One decision of the allocator for a job, as the status records it.
struct ScalingDecision {
  std::string action;  // scaler::to_string(AllocAction): admit, scale-up, keep, preempt, ...
  std::string reason;
  std::int64_t epoch = 0;  // the plan epoch the decision leads to
  std::string time;        // RFC 3339, the operator's clock
  // FlexTrain §5.1's benefit check, when the decision ran one.
  bool has_benefit = false;
  double arrival_rate_per_s = 0, speedup = 0, overhead_s = 0, required_idle_s = 0, probability = 0, threshold = 0;

  bool operator==(const ScalingDecision&) const = default;
};

nlohmann::json to_json(const ScalingDecision& decision);
ScalingDecision decision_from_json(const nlohmann::json& entry);

void record_decision(nlohmann::json& status, const ScalingDecision& decision);
std::vector<ScalingDecision> recent_decisions(const nlohmann::json& status);

}  // namespace flotilla::op
