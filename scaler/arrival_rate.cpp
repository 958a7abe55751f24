#include "scaler/arrival_rate.h"

#include <algorithm>

namespace flotilla::scaler {

ArrivalRateEstimator::ArrivalRateEstimator(double window_s, int min_gpus)
    : window_s_(window_s > 0 ? window_s : 1.0), min_gpus_(min_gpus) {}

void ArrivalRateEstimator::record(double submit_s, int gpus) {
  if (gpus < min_gpus_) return;
  if (times_.empty() || times_.back() <= submit_s) {
    times_.push_back(submit_s);
  } else {
    times_.insert(std::upper_bound(times_.begin(), times_.end(), submit_s), submit_s);
  }
}

double ArrivalRateEstimator::rate_per_s(double now_s) {
  const double start = now_s - window_s_;
  while (!times_.empty() && times_.front() <= start) times_.pop_front();
  const auto in_window =
      std::upper_bound(times_.begin(), times_.end(), now_s) - times_.begin();
  return static_cast<double>(in_window) / window_s_;
}

}  // namespace flotilla::scaler
