// memory_prediction_error(): hand-computed ratios over a two-stage plan.
#include "operator/memory_error.h"

#include <gtest/gtest.h>

namespace fo = flotilla::op;

namespace {
fo::PodObservation reporting(const char* name, std::int64_t epoch, std::int64_t peak_bytes) {
  fo::PodObservation p;
  p.name = name;
  flotilla::PodReport r;
  r.epoch = epoch;
  r.state = flotilla::PodState::kRunning;
  r.peak_bytes = peak_bytes;
  p.report = r;
  return p;
}
}  // namespace

TEST(MemoryPredictionError, LargestRelativeErrorOverMeasuredPods) {
  fo::JobPlan plan;
  plan.epoch = 3;
  plan.stages.resize(2);
  plan.stages[0].pods = {"a"};
  plan.stages[0].predicted_peak_bytes = 10'000;
  plan.stages[1].pods = {"a", "b"};
  plan.stages[1].predicted_peak_bytes = 6'000;
  EXPECT_FALSE(fo::memory_prediction_error(plan, {}).has_value()) << "nothing measured: no number";
  EXPECT_FALSE(fo::memory_prediction_error(plan, {reporting("a", 3, 0)}).has_value());
  // a runs both stages: predicted max(10000, 6000) = 10000, measured 8000 -> 2000/8000 = 0.25.
  EXPECT_DOUBLE_EQ(fo::memory_prediction_error(plan, {reporting("a", 3, 8'000)}).value(), 0.25);
  // b: predicted 6000, measured 5000 -> 0.2; the larger of a and b wins.
  EXPECT_DOUBLE_EQ(fo::memory_prediction_error(plan, {reporting("a", 3, 8'000), reporting("b", 3, 5'000)}).value(),
                   0.25);
  EXPECT_DOUBLE_EQ(fo::memory_prediction_error(plan, {reporting("b", 3, 5'000)}).value(), 0.2);
  // A report of an older epoch, or of a pod outside the plan, does not count.
  EXPECT_FALSE(fo::memory_prediction_error(plan, {reporting("a", 2, 1), reporting("z", 3, 1)}).has_value());
}
