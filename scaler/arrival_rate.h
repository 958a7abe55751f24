// Sliding-window arrival rate λ of "large" job submissions (FlexTrain §5.1).
//
// Guarantees: rate_per_s(now) = (#submissions with gpus >= min_gpus and time in (now-window, now])
//   / window_s. Pure: the caller records submissions and passes the current time.
// Assumes: submissions are recorded in non-decreasing time order (a simulator or an operator
//   observing arrivals does this naturally); out-of-order records are inserted in order.
// Caveats: at the start of a trace (now < window) the rate still divides by the full window,
//   which under-estimates λ for the first window_s seconds; FlexTrain does not say otherwise.
#pragma once

#include <deque>

namespace flotilla::scaler {

class ArrivalRateEstimator {
 public:
  ArrivalRateEstimator(double window_s, int min_gpus);

  // Records one job submission; jobs below min_gpus are ignored (they cannot reclaim much).
  void record(double submit_s, int gpus);

  // λ in arrivals per second over (now_s - window_s, now_s]. Drops records older than the window.
  double rate_per_s(double now_s);

  double window_s() const { return window_s_; }
  int min_gpus() const { return min_gpus_; }

 private:
  double window_s_;
  int min_gpus_;
  std::deque<double> times_;
};

}  // namespace flotilla::scaler
