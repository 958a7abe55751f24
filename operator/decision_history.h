// The scaling decisions a TrainingJob's status keeps: status.lastDecision (the newest) and
// status.recentDecisions (the newest kRecentDecisions, oldest first). A reader that polls (the
// demo's observer, a user's script, `kubectl get -o json`) sees every decision even when the
// next one replaces lastDecision within its poll interval (a preemption followed at once by the
// refused scale-up of the next pass).
//
// Guarantees: record_decision() sets lastDecision to `decision` and appends it to
//   recentDecisions, dropping the oldest beyond kRecentDecisions; a decision equal to the newest
//   in all but its time (a reconcile repeating itself) refreshes lastDecision without a new
//   entry, so repetition cannot push older decisions out. recent_decisions() returns
//   recentDecisions, or lastDecision alone for a status written before the history existed, or
//   nothing.
// Assumes: `decision` is an object with action, reason, epoch and time (job_reconciler.cpp).
// Caveats: pure JSON in and out; entries are never edited once appended.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

inline constexpr std::size_t kRecentDecisions = 8;

void record_decision(nlohmann::json& status, const nlohmann::json& decision);
std::vector<nlohmann::json> recent_decisions(const nlohmann::json& status);

}  // namespace flotilla::op
