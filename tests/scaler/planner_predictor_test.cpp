// Scale tables with the planner's time/memory model beside FlexTrain's eq. 5/6.
#include <gtest/gtest.h>

#include <cmath>

#include "planner/model_spec.h"
#include "scaler/modeling_predictor.h"
#include "scaler/planner_predictor.h"

using namespace flotilla;
using namespace flotilla::scaler;

namespace {
PlannerJob job(const char* model, ParallelConfig initial) {
  PlannerJob j;
  j.model = *planner::find_preset(model);
  j.gpu_type = "A100-80";
  j.global_batch = 256;
  j.initial = initial;
  j.options.precision = planner::Precision::kBf16Mixed;
  j.options.zero_stage = 1;
  return j;
}
}  // namespace

TEST(ScalerPlannerPredictor, StrictTableFromThePlannerTimeModel) {
  const auto pp = make_planner_predictor(job("gpt-neo-2.7b", {2, 2, 1, 1}));
  ASSERT_TRUE(pp.error.empty()) << pp.error;
  const auto r = build_scale_table(pp.elastic_model, {}, pp.predictor);
  ASSERT_TRUE(r.table) << r.error;
  const auto& t = *r.table;
  int above = 0;
  double last = 1.0;
  for (const auto& e : t.entries) {
    EXPECT_EQ(e.config.dp, 2);  // strict: only PP moves
    EXPECT_EQ(e.config.tp, 1);
    if (e.gpus <= 4) continue;
    ++above;
    EXPECT_GT(e.speedup, last);
    last = e.speedup;
    // Kept entries passed the §4.4.4 discrepancy rule against eq. 5/6.
    EXPECT_LE(std::fabs(e.speedup - e.modeled_speedup) / e.modeled_speedup, 0.25);
  }
  EXPECT_GE(above, 3);
  // Eq. 5 by hand for PP 2 -> 4 (L = 32 layers, m = 128): (128*16+1)/(128*8+3) = 1.995; the
  // planner's 1F1B with its own costs must land in the same neighbourhood.
  ASSERT_NE(t.find(8), nullptr);
  EXPECT_NEAR(t.find(8)->modeled_speedup, 2049.0 / 1027.0, 1e-9);
  EXPECT_GT(t.find(8)->speedup, 1.5);
  EXPECT_LT(t.find(8)->speedup, 2.2);
}

TEST(ScalerPlannerPredictor, InfeasibleLayoutsAreErrorsNotCrashes) {
  // Llama-2-7B, 2 stages without TP or recompute on 80 GB: the planner's memory model says OOM.
  auto pp = make_planner_predictor(job("llama-2-7b", {2, 2, 1, 1}));
  ASSERT_TRUE(pp.error.empty()) << pp.error;
  const auto r = build_scale_table(pp.elastic_model, {}, pp.predictor);
  EXPECT_FALSE(r.table);
  EXPECT_NE(r.error.find("OOM"), std::string::npos) << r.error;
  EXPECT_FALSE(make_planner_predictor(job("gpt-neo-2.7b", {2, 2, 1, 2})).error.empty());
  auto bad_gpu = job("gpt-neo-2.7b", {2, 2, 1, 1});
  bad_gpu.gpu_type = "Z80";
  EXPECT_NE(make_planner_predictor(bad_gpu).error.find("unknown GPU"), std::string::npos);
  // A batch that DP does not divide is infeasible, not a crash.
  EXPECT_FALSE(make_planner_predictor(job("gpt-neo-2.7b", {2, 2, 1, 1})).predictor({3, 2, 1, 1}).feasible);
}
