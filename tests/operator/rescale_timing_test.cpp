// time_rescale(): the rescale phases from two successive statuses, against hand-computed seconds.
#include "operator/rescale_timing.h"

#include <gtest/gtest.h>

namespace fo = flotilla::op;
using Json = nlohmann::json;

namespace {
// 2026-11-24T00:00:00Z in seconds since the epoch.
constexpr double kT0 = 1795478400;

Json status(const char* phase, int epoch, int barrier) {
  return {{"phase", phase},
          {"lastRescaleTime", "2026-11-24T00:00:00Z"},
          {"plan", {{"epoch", epoch}, {"barrier", barrier}}}};
}
}  // namespace

TEST(RescaleTiming, DrainThenRestartThenTotal) {
  // Epoch 3 planned at T0 behind barrier 2; the barrier lifts at T0+4 s; Running at T0+6.5 s.
  fo::RescaleTiming lift = fo::time_rescale(status("Rescaling", 3, 2), status("Rescaling", 3, 3), kT0 + 4, 0);
  ASSERT_TRUE(lift.barrier_lifted);
  ASSERT_EQ(lift.observations.size(), 1u);
  EXPECT_EQ(lift.observations[0].first, "drain");
  EXPECT_DOUBLE_EQ(lift.observations[0].second, 4);
  fo::RescaleTiming run = fo::time_rescale(status("Rescaling", 3, 3), status("Running", 3, 3), kT0 + 6.5, kT0 + 4);
  EXPECT_FALSE(run.barrier_lifted);
  ASSERT_EQ(run.observations.size(), 2u);
  EXPECT_EQ(run.observations[0].first, "restart");
  EXPECT_DOUBLE_EQ(run.observations[0].second, 2.5);
  EXPECT_EQ(run.observations[1].first, "total");
  EXPECT_DOUBLE_EQ(run.observations[1].second, 6.5);
}

TEST(RescaleTiming, FirstAdmissionAndStillDrainingAreNotObserved) {
  EXPECT_TRUE(fo::time_rescale(status("Pending", 1, 1), status("Running", 1, 1), kT0 + 9, 0).observations.empty());
  EXPECT_TRUE(fo::time_rescale(status("Running", 2, 2), status("Rescaling", 3, 2), kT0, 0).observations.empty());
  EXPECT_TRUE(fo::time_rescale(status("Rescaling", 3, 2), status("Rescaling", 3, 2), kT0 + 1, 0).observations.empty());
  // An operator restarted mid-rescale does not know the lift time: total only.
  const auto r = fo::time_rescale(status("Rescaling", 3, 3), status("Running", 3, 3), kT0 + 7, 0);
  ASSERT_EQ(r.observations.size(), 1u);
  EXPECT_EQ(r.observations[0].first, "total");
}

TEST(RescaleTiming, AgeOfARescaleInProgress) {
  EXPECT_DOUBLE_EQ(fo::rescaling_age_seconds(status("Rescaling", 3, 2), kT0 + 700), 700);
  EXPECT_DOUBLE_EQ(fo::rescaling_age_seconds(status("Running", 3, 3), kT0 + 700), 0);
  EXPECT_DOUBLE_EQ(fo::rescaling_age_seconds(Json::object(), kT0), 0);
}
