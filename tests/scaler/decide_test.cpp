// decide(): one job's decision, the simulators' call (the operator's allocator shares its
// choose_scale_up), on a hand-written table.
#include <gtest/gtest.h>

#include <cmath>

#include "scaler/decide.h"
#include "test_models.h"

using namespace flotilla::scaler;

namespace {
ScaleTable table() {
  return test_models::hand_table({{8, 0.55}, {16, 1.0}, {24, 1.4}, {32, 1.8}}, 16, 32);
}
}  // namespace

TEST(ScalerDecide, ScalesUpWithTheMeasuredRestartTime) {
  const auto t = table();
  const JobSnapshot j{.current_gpus = 16, .free_gpus = 20, .arrival_rate_per_s = 1.0 / 3600, .measured_restart_s = 120};
  const auto d = decide(t, j);
  // 16 -> 32: S = 1.8, S/(S-1) = 2.25, 2.25 * 120 / 3600 = 0.075 < 0.51.
  EXPECT_EQ(d.action, ScaleAction::scale_up);
  EXPECT_EQ(d.target_gpus, 32);
  EXPECT_EQ(d.target->config.pp, 4);
  ASSERT_TRUE(d.benefit);
  EXPECT_NEAR(d.benefit->probability, std::exp(-0.075), 1e-12);
  EXPECT_DOUBLE_EQ(d.overhead_s, 120);
  EXPECT_NE(d.reason.find("lambda_per_h=1"), std::string::npos) << d.reason;
}

TEST(ScalerDecide, BenefitCheckCanRefuse) {
  const auto t = table();
  const JobSnapshot j{.current_gpus = 24, .free_gpus = 8, .arrival_rate_per_s = 1.0 / 600, .measured_restart_s = 120};
  // 24 -> 32: S = 1.8/1.4 = 1.2857, S/(S-1) = 4.5, 4.5 * 120 / 600 = 0.9 > 0.51.
  const auto d = decide(t, j);
  EXPECT_EQ(d.action, ScaleAction::keep);
  ASSERT_TRUE(d.benefit);
  EXPECT_NEAR(d.benefit->probability, std::exp(-0.9), 1e-12);
  DecideParams greedy;
  greedy.use_benefit_check = false;
  EXPECT_EQ(decide(t, j, greedy).action, ScaleAction::scale_up);
}

TEST(ScalerDecide, KeepsWhileJobsWaitAndShrinksOrRequeuesOnLoss) {
  const auto t = table();
  JobSnapshot j;
  j.current_gpus = 24;
  j.free_gpus = 8;
  j.queue_empty = false;
  EXPECT_EQ(decide(t, j).action, ScaleAction::keep);
  j.gpus_alive = 17;  // a node of 8 gone (and one more GPU): PP 2 on 16
  auto d = decide(t, j);
  EXPECT_EQ(d.action, ScaleAction::shrink);
  EXPECT_EQ(d.target_gpus, 16);
  EXPECT_EQ(d.target->config.dp, 1);
  EXPECT_EQ(d.target->config.pp, 2);
  j.gpus_alive = 5;
  d = decide(t, j);
  EXPECT_EQ(d.action, ScaleAction::requeue);
  EXPECT_STREQ(to_string(d.action), "requeue");
}

// A job with R seconds of training left, scaled up with speedup S after a restart of T_o,
// finishes at T_o + R/S: later than R unless R > S/(S-1)·T_o. 16 -> 32 GPUs: S = 1.8,
// T_o = 120 s measured: break-even 2.25 x 120 = 270 s. λ = 0, so the Poisson check passes.
TEST(ScalerDecide, AJobThatEndsBeforeTheRestartRepaysItselfKeepsItsGpus) {
  const auto t = table();
  JobSnapshot j{.current_gpus = 16, .free_gpus = 20, .arrival_rate_per_s = 0, .measured_restart_s = 120};
  j.remaining_s = 270;
  auto d = decide(t, j);
  EXPECT_EQ(d.action, ScaleAction::keep);
  EXPECT_TRUE(d.ends_before_restart_repays);
  ASSERT_TRUE(d.benefit);
  EXPECT_TRUE(d.benefit->scale_up) << "the Poisson check's own answer is kept";
  EXPECT_NEAR(d.benefit->required_idle_s, 270, 1e-9);
  EXPECT_NE(d.reason.find("needs more than 270 s of training left"), std::string::npos) << d.reason;
  j.remaining_s = 271;
  d = decide(t, j);
  EXPECT_EQ(d.action, ScaleAction::scale_up);
  EXPECT_FALSE(d.ends_before_restart_repays);
  EXPECT_EQ(d.target_gpus, 32);
  // Unknown time left is taken as long; the greedy baseline has no check and no guard.
  j.remaining_s.reset();
  EXPECT_EQ(decide(t, j).action, ScaleAction::scale_up);
  j.remaining_s = 1;
  DecideParams greedy;
  greedy.use_benefit_check = false;
  EXPECT_EQ(decide(t, j, greedy).action, ScaleAction::scale_up);
}
