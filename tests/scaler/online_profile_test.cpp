// Online profiling: measured per-stage times folded into the cost model and the scale table.
#include <gtest/gtest.h>

#include "common/progress_line.h"
#include "scaler/online_profile.h"
#include "test_models.h"

using namespace flotilla::scaler;
using test_models::uniform_model;

namespace {
// 8 layers of 1 s forward + 2 s backward, B = 8, initial PP 2, plus 1 s per p2p transfer so that
// compute and communication do not scale together.
ElasticModel model_with_p2p() {
  auto m = uniform_model(8, 8, {1, 2, 1, 1});
  m.p2p_s = 1.0;
  return m;
}
StageMeasurement stage(int s, double f, double b, int micro_batches = 8) {
  return {s, std::vector<double>(micro_batches, f), std::vector<double>(micro_batches, b)};
}
}  // namespace

TEST(ScalerOnlineProfile, SlowerComputeRaisesSpeedupsByHand) {
  const auto m = model_with_p2p();
  // By hand, before: PP 2 stages of 4 layers = 12 s: 2*12 + 7*12 + 2*1*1 = 110 s;
  // PP 4 stages of 6 s: 4*6 + 7*6 + 2*3*1 = 72 s; speedup 110/72.
  const auto before = build_scale_table(m, {});
  ASSERT_TRUE(before.table) << before.error;
  ASSERT_NE(before.table->find(4), nullptr);
  EXPECT_NEAR(before.table->find(4)->speedup, 110.0 / 72.0, 1e-9);
  // Measured on PP 2: 8 s forward and 16 s backward per micro-batch per stage (predicted 4 and
  // 8): twice as slow. After: layer 6 s; PP 2 = 2*24 + 7*24 + 2 = 218 s; PP 4 = 4*12 + 7*12 + 6
  // = 138 s; speedup 218/138 — higher, since the 1 s transfers now weigh less.
  const auto r = fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(0, 8, 16), stage(1, 8, 16)});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.forward_ratio, 2.0);
  EXPECT_DOUBLE_EQ(r.backward_ratio, 2.0);
  EXPECT_FALSE(r.clamped);
  ASSERT_TRUE(r.model && r.table) << r.table_error;
  EXPECT_DOUBLE_EQ(r.model->layer_fwd_s, 2.0);
  EXPECT_DOUBLE_EQ(r.model->layer_bwd_s, 4.0);
  ASSERT_NE(r.table->find(2), nullptr);
  EXPECT_NEAR(r.table->find(2)->iteration_s, 218.0, 1e-9);
  ASSERT_NE(r.table->find(4), nullptr);
  EXPECT_NEAR(r.table->find(4)->speedup, 218.0 / 138.0, 1e-9);
  EXPECT_GT(r.table->find(4)->speedup, before.table->find(4)->speedup);
  EXPECT_NE(r.explain().find("forward x2.000"), std::string::npos) << r.explain();
}

TEST(ScalerOnlineProfile, RanksOfAStageAreAveragedAndRatiosAreSeparate) {
  const auto m = model_with_p2p();
  // Stage 0 reported by two DP ranks (4 and 6 s forward: mean 5), stage 1 by one (3 s);
  // predicted 4 + 4: forward ratio (5 + 3) / 8 = 1. Backward 12 and 12 against 8 + 8: 1.5.
  const auto r = fold_measured_stage_times(
      m, {1, 2, 1, 1}, {stage(0, 4, 12), stage(0, 6, 12), stage(1, 3, 12, 5)});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.raw_forward_ratio, 1.0);
  EXPECT_DOUBLE_EQ(r.raw_backward_ratio, 1.5);
  EXPECT_DOUBLE_EQ(r.model->layer_bwd_s, 3.0);
}

TEST(ScalerOnlineProfile, OneMeasurementMovesTheTableOnlyWithinTheBounds) {
  const auto m = model_with_p2p();
  const auto r = fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(0, 40, 80), stage(1, 40, 80)});
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.raw_forward_ratio, 10.0);
  EXPECT_DOUBLE_EQ(r.forward_ratio, 2.0);  // default max_ratio
  EXPECT_TRUE(r.clamped);
  OnlineProfileParams wide;
  wide.max_ratio = 20;
  EXPECT_DOUBLE_EQ(fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(0, 40, 80)}, {}, wide).forward_ratio,
                   10.0);
}

TEST(ScalerOnlineProfile, BadMeasurementsAreOneLineErrors) {
  const auto m = model_with_p2p();
  EXPECT_NE(fold_measured_stage_times(m, {1, 2, 1, 1}, {}).error, "");
  EXPECT_NE(fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(2, 1, 1)}).error.find("stage 2"),
            std::string::npos);
  EXPECT_NE(fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(0, -1, 1)}).error, "");
  EXPECT_NE(fold_measured_stage_times(m, {1, 2, 1, 1}, {{0, {}, {1.0}}}).error, "");
  EXPECT_NE(fold_measured_stage_times(m, {1, 9, 1, 1}, {stage(0, 1, 1)}).error, "");  // PP > L
  OnlineProfileParams inverted;
  inverted.min_ratio = 3;
  inverted.max_ratio = 2;
  EXPECT_NE(fold_measured_stage_times(m, {1, 2, 1, 1}, {stage(0, 1, 1)}, {}, inverted).error, "");
}

// The worker's step line (common/progress_line.h) is what the fold reads.
TEST(ScalerOnlineProfile, ReadsTheWorkersStepProgressLine) {
  flotilla::StepProgress written;
  written.stage = 1;
  written.forward_seconds = {0.25, 0.5};
  written.backward_seconds = {0.75, 1.0};
  std::string error;
  auto m = stage_measurement_from_progress_line(flotilla::format_step_line(written), &error);
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(m->stage, 1);
  EXPECT_EQ(m->forward_seconds, written.forward_seconds);
  EXPECT_EQ(m->backward_seconds, written.backward_seconds);
  EXPECT_FALSE(stage_measurement_from_progress_line(R"({"event":"checkpoint","step":2})", &error));
  EXPECT_NE(error.find("not a step event"), std::string::npos) << error;
}
