// FlexTrain eq. 16 against hand-computed cases: λ·S/(S−1)·T_o < ln(1/P_th), P_th = 0.6.
#include <gtest/gtest.h>

#include <cmath>

#include "scaler/benefit_check.h"
#include "scaler/restart_overhead.h"

using namespace flotilla::scaler;

TEST(ScalerBenefitCheck, PassesWhenArrivalsAreRare) {
  // One large arrival per hour, S = 2, T_o = 600 s: 1/3600 * 2 * 600 = 1/3 < ln(1/0.6) = 0.5108.
  const auto d = check_benefit(1.0 / 3600, 2.0, 600);
  EXPECT_TRUE(d.scale_up);
  EXPECT_NEAR(d.required_idle_s, 1200.0, 1e-9);
  EXPECT_NEAR(d.probability, std::exp(-1.0 / 3), 1e-12);  // 0.7165
  EXPECT_DOUBLE_EQ(d.arrival_rate_per_s, 1.0 / 3600);
  EXPECT_DOUBLE_EQ(d.speedup, 2.0);
  EXPECT_DOUBLE_EQ(d.overhead_s, 600.0);
}

TEST(ScalerBenefitCheck, RefusesSmallSpeedupUnderTheSameArrivals) {
  // S = 1.25: S/(S-1) = 5, 5 * 600 / 3600 = 0.8333 > 0.5108; P = e^-0.8333 = 0.4346 < 0.6.
  const auto d = check_benefit(1.0 / 3600, 1.25, 600);
  EXPECT_FALSE(d.scale_up);
  EXPECT_NEAR(d.required_idle_s, 3000.0, 1e-9);
  EXPECT_NEAR(d.probability, 0.43460, 1e-5);
}

TEST(ScalerBenefitCheck, ThresholdMovesTheDecision) {
  // Same inputs as the refused case pass with P_th = 0.4 (ln 2.5 = 0.9163 > 0.8333).
  EXPECT_TRUE(check_benefit(1.0 / 3600, 1.25, 600, {0.4}).scale_up);
  // Just either side of the boundary: exponent = 0.99 and 1.01 x ln(1/0.6).
  const double boundary_rate = std::log(1 / 0.6) / (2.0 * 600);
  EXPECT_TRUE(check_benefit(0.99 * boundary_rate, 2.0, 600).scale_up);
  EXPECT_FALSE(check_benefit(1.01 * boundary_rate, 2.0, 600).scale_up);
}

TEST(ScalerBenefitCheck, NoGainNeverScalesAndNoArrivalsAlwaysDoes) {
  EXPECT_FALSE(check_benefit(0.0, 1.0, 10).scale_up);
  EXPECT_FALSE(check_benefit(0.0, 0.8, 10).scale_up);
  EXPECT_TRUE(check_benefit(0.0, 1.01, 1e6).scale_up);
  EXPECT_NE(check_benefit(1e-4, 1.5, 60).explain().find("lambda_per_h=0.36"), std::string::npos);
}

TEST(ScalerRestartOverhead, EstimateFromCheckpointAndBandwidth) {
  // 160 GB checkpoint, 32 -> 64 GPUs on 8-GPU nodes at 2 GB/s per node:
  // save 160/(4*2) = 20 s, load 160/(8*2) = 10 s, init 30 + 0.5*8 = 34 s.
  const auto o = estimate_restart_overhead(160e9, 32, 64);
  EXPECT_NEAR(o.save_s, 20.0, 1e-9);
  EXPECT_NEAR(o.load_s, 10.0, 1e-9);
  EXPECT_NEAR(o.init_s, 34.0, 1e-9);
  EXPECT_NEAR(o.total_s(), 64.0, 1e-9);
  EXPECT_FALSE(o.measured);
  const auto m = estimate_restart_overhead(160e9, 32, 64, 42.0);
  EXPECT_TRUE(m.measured);
  EXPECT_DOUBLE_EQ(m.total_s(), 42.0);
}
