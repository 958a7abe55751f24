#include "operator/memory_error.h"

#include <algorithm>
#include <cmath>

namespace flotilla::op {

std::optional<double> memory_prediction_error(const JobPlan& plan, const std::vector<PodObservation>& pods) {
  std::optional<double> worst;
  for (const PodObservation& pod : pods) {
    if (!pod.report || pod.report->epoch != plan.epoch || pod.report->peak_bytes <= 0) continue;
    const std::int64_t predicted = plan.predicted_for(pod.name).peak_bytes;
    if (predicted <= 0) continue;  // not a pod of this plan
    const double measured = static_cast<double>(pod.report->peak_bytes);
    const double error = std::abs(static_cast<double>(predicted) - measured) / measured;
    worst = std::max(worst.value_or(0.0), error);
  }
  return worst;
}

}  // namespace flotilla::op
