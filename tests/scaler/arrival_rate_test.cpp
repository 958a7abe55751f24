#include <gtest/gtest.h>

#include "scaler/arrival_rate.h"

using flotilla::scaler::ArrivalRateEstimator;

TEST(ScalerArrivalRate, CountsLargeJobsInTheWindowOnly) {
  const double w = 8 * 3600.0;  // 28800 s
  ArrivalRateEstimator est(w, 32);
  est.record(0, 64);
  est.record(100, 8);  // below min_gpus: not counted
  est.record(1000, 32);
  est.record(20000, 128);
  est.record(30000, 32);
  // Window (0, 28800]: 1000 and 20000 (0 is on the open edge).
  EXPECT_DOUBLE_EQ(est.rate_per_s(28800), 2 / w);
  // Window (1200, 30000]: 20000 and 30000.
  EXPECT_DOUBLE_EQ(est.rate_per_s(30000), 2 / w);
  // Window (21200, 50000]: 30000 only.
  EXPECT_DOUBLE_EQ(est.rate_per_s(50000), 1 / w);
  EXPECT_DOUBLE_EQ(est.rate_per_s(1e6), 0.0);
}

TEST(ScalerArrivalRate, OutOfOrderRecordsAndFutureRecords) {
  ArrivalRateEstimator est(100, 1);
  est.record(50, 1);
  est.record(10, 1);  // inserted in order
  est.record(90, 1);
  EXPECT_DOUBLE_EQ(est.rate_per_s(60), 2 / 100.0);   // 10, 50 (90 is in the future)
  EXPECT_DOUBLE_EQ(est.rate_per_s(105), 3 / 100.0);  // (5, 105]: 10, 50, 90
  EXPECT_DOUBLE_EQ(est.rate_per_s(155), 1 / 100.0);  // (55, 155]: 90
}
