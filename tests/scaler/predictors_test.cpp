// FlexTrain eq. 5/6 and the pipeline predictor against hand-computed values.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/scaler/test_models.h"
#include "scaler/modeling_predictor.h"
#include "scaler/pipeline_predictor.h"

using namespace flotilla::scaler;

TEST(ScalerModelingPredictor, Eq5WhenMicroBatchesExceedStages) {
  // L = 17, B = 1024, d = 1: m = 1024. p = 4: v = 5, (1024*5 + 3) slots.
  EXPECT_DOUBLE_EQ(*modeled_iteration_s(17, 1024, 1, 4, 0.5), 5123 * 0.5);
  // p = 16: v = 2, (2048 + 15).
  EXPECT_DOUBLE_EQ(*modeled_iteration_s(17, 1024, 1, 16, 1.0), 2063.0);
  // Eq. 6: d = 4 gives m = 256; p = 8: v = 3, 256*3 + 7 = 775.
  EXPECT_DOUBLE_EQ(*modeled_iteration_s(17, 1024, 4, 8, 1.0), 775.0);
}

TEST(ScalerModelingPredictor, Eq5WhenStagesExceedMicroBatches) {
  // L = 8, B = 4, d = 2: m = 2 < p = 4, v = 2: p*v + m - 1 = 9 slots.
  EXPECT_DOUBLE_EQ(*modeled_iteration_s(8, 4, 2, 4, 1.0), 9.0);
}

TEST(ScalerModelingPredictor, InfeasibleByHyperParameters) {
  EXPECT_FALSE(modeled_iteration_s(17, 1024, 3, 4, 1.0));  // 1024 % 3 != 0
  EXPECT_FALSE(modeled_iteration_s(17, 1024, 1, 18, 1.0));  // p > L
  EXPECT_FALSE(modeled_iteration_s(17, 1024, 0, 4, 1.0));
}

using test_models::uniform_model;

TEST(ScalerPipelinePredictor, OneFOneBByHand) {
  const auto m = uniform_model();  // t = 3 s per layer, m = 8 micro-batches
  // p = 2: stages of 4 layers = 12 s: sum 24 + 7 * 12 = 108 s.
  EXPECT_DOUBLE_EQ(predict_pipeline(m, {1, 2, 1, 1}).iteration_s, 108.0);
  // p = 4: stages of 2 layers = 6 s: sum 24 + 7 * 6 = 66 s.
  EXPECT_DOUBLE_EQ(predict_pipeline(m, {1, 4, 1, 1}).iteration_s, 66.0);
  // p = 3 (does not divide 8): best split is 3/3/2 -> 9 s: 24 + 7 * 9 = 87 s.
  const auto p3 = predict_pipeline(m, {1, 3, 1, 1});
  ASSERT_TRUE(p3.feasible);
  EXPECT_DOUBLE_EQ(p3.iteration_s, 87.0);
  EXPECT_EQ(std::accumulate(p3.layers_per_stage.begin(), p3.layers_per_stage.end(), 0), 8);
  EXPECT_EQ(*std::max_element(p3.layers_per_stage.begin(), p3.layers_per_stage.end()), 3);
}

TEST(ScalerPipelinePredictor, InfeasibleCasesComeBackWithReasons) {
  auto m = uniform_model();
  const auto too_deep = predict_pipeline(m, {1, 9, 1, 1});
  EXPECT_FALSE(too_deep.feasible);
  EXPECT_NE(too_deep.infeasible_reason.find("exceeds"), std::string::npos);
  const auto bad_dp = predict_pipeline(m, {3, 2, 1, 1});
  EXPECT_FALSE(bad_dp.feasible);
  EXPECT_NE(bad_dp.infeasible_reason.find("divisible"), std::string::npos);
  // 10 GB per layer static, 20 GB GPUs: p = 2 (4 layers) is OOM, p = 8 fits.
  m.layer_static_bytes = 10e9;
  m.gpu_memory_bytes = 20e9;
  const auto oom = predict_pipeline(m, {1, 2, 1, 1});
  EXPECT_FALSE(oom.feasible);
  EXPECT_NE(oom.infeasible_reason.find("out of memory"), std::string::npos);
  ASSERT_EQ(oom.peak_bytes_per_stage.size(), 2u);
  EXPECT_DOUBLE_EQ(oom.peak_bytes_per_stage[0], 40e9);
  EXPECT_TRUE(predict_pipeline(m, {1, 8, 1, 1}).feasible);
}

TEST(ScalerPipelinePredictor, ActivationsFollowOneFOneBInFlightCount) {
  auto m = uniform_model();
  m.layer_activation_bytes = 1e9;
  // p = 4, m = 8: stage i holds min(4 - i, 8) micro-batches of its 2 layers.
  const auto p = predict_pipeline(m, {1, 4, 1, 1});
  ASSERT_EQ(p.peak_bytes_per_stage.size(), 4u);
  EXPECT_DOUBLE_EQ(p.peak_bytes_per_stage[0], 8e9);
  EXPECT_DOUBLE_EQ(p.peak_bytes_per_stage[3], 2e9);
}

TEST(ScalerPipelinePredictor, BalancedSplitPutsTheEmbeddingCostIntoAccount) {
  // Six unit layers, first stage also pays 3: best is 1 | 3 | 2 style, max stage 4 minimised.
  const auto split = balanced_split({1, 1, 1, 1, 1, 1}, 3, 3.0, 0.0);
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0], 1);
  EXPECT_TRUE(balanced_split({1, 1}, 3, 0, 0).empty());
}
