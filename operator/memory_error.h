// How far the planner's predicted peak memory is from what the workers measured: the input of
// flotilla_memory_prediction_error_ratio and its alert.
//
// Guarantees (pure): memory_prediction_error() is the largest |predicted − measured| / measured
//   over the plan's pods whose report, for the plan's epoch, carries a measured peak
//   (PodReport::peak_bytes > 0); a pod's prediction is JobPlan::predicted_for() (its own ranks'). nullopt when no pod has measured yet, so no number is claimed for it.
// Assumes: `pods` are the job's pods as the operator observes them (job_reconciler.h).
#pragma once

#include <optional>
#include <vector>

#include "operator/job_plan.h"
#include "operator/job_reconciler.h"

namespace flotilla::op {

std::optional<double> memory_prediction_error(const JobPlan& plan, const std::vector<PodObservation>& pods);

}  // namespace flotilla::op
