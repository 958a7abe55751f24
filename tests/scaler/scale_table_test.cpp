// §4.4.4 filtering on hand-made candidates, and scale tables built from models.
#include <gtest/gtest.h>

#include <limits>

#include "tests/scaler/test_models.h"
#include "scaler/scale_table.h"

using namespace flotilla::scaler;

namespace {
ScaleCandidate cand(int gpus, double sim, double model) {
  ScaleCandidate c;
  c.gpus = gpus;
  c.config = {1, gpus / 8, 1, 8};
  c.speedup = sim;
  c.modeled_speedup = model;
  return c;
}
}  // namespace

TEST(ScalerScaleFilter, EachRuleDropsTheRightCandidate) {
  // Start point: initial layout, speedup 1 under both predictors.
  const std::vector<ScaleCandidate> in = {
      cand(40, 1.20, 1.25),  // up/up, 4 % apart, +20 %: kept
      cand(48, 1.15, 1.30),  // sim down, model up: trend
      cand(56, 1.70, 1.31),  // up/up, |1.70-1.31|/1.31 = 30 % > 25 %: discrepancy
      cand(64, 1.75, 1.50),  // up/up, 17 % apart, 1.75 >= 1.05*1.20: kept
      cand(72, 1.80, 1.55),  // up/up, 16 %, but 1.80 < 1.05*1.75 = 1.8375: marginal
      cand(80, 2.00, 1.90),  // kept
  };
  const auto out = filter_scale_candidates(in);
  ASSERT_EQ(out.kept.size(), 3u);
  EXPECT_EQ(out.kept[0].gpus, 40);
  EXPECT_EQ(out.kept[1].gpus, 64);
  EXPECT_EQ(out.kept[2].gpus, 80);
  ASSERT_EQ(out.rejected.size(), 3u);
  EXPECT_EQ(out.rejected[0].candidate.gpus, 48);
  EXPECT_EQ(out.rejected[0].reason.rfind("trend", 0), 0u);
  EXPECT_EQ(out.rejected[1].candidate.gpus, 56);
  EXPECT_EQ(out.rejected[1].reason.rfind("discrepancy", 0), 0u);
  EXPECT_EQ(out.rejected[2].candidate.gpus, 72);
  EXPECT_EQ(out.rejected[2].reason.rfind("marginal", 0), 0u);
}

TEST(ScalerScaleFilter, ThresholdsAreParameters) {
  ScaleFilterParams loose;
  loose.max_relative_discrepancy = 0.5;
  loose.min_marginal_gain = 0.0;
  const auto out = filter_scale_candidates({cand(40, 1.2, 1.25), cand(48, 1.7, 1.31)}, loose);
  EXPECT_EQ(out.kept.size(), 2u);
}

using test_models::uniform_model;

TEST(ScalerScaleTable, StrictKeepsDpTpCpAndHandComputedSpeedups) {
  const auto r = build_scale_table(uniform_model(), {});
  ASSERT_TRUE(r.table) << r.error;
  const auto& t = *r.table;
  EXPECT_EQ(t.cap_gpus, 8);  // 4 x 2
  for (const auto& e : t.entries) {
    EXPECT_EQ(e.config.dp, 1);
    EXPECT_EQ(e.config.tp, 1);
    EXPECT_EQ(e.config.cp, 1);
    EXPECT_EQ(e.gpus, e.config.pp);
  }
  EXPECT_DOUBLE_EQ(t.speedup_at(2), 1.0);
  // 1F1B by hand (m = 8, layer 3 s): p=2 108 s, p=4 66 s -> 1.636; eq. 5: 33 vs 19 slots.
  ASSERT_NE(t.find(4), nullptr);
  EXPECT_NEAR(t.find(4)->speedup, 108.0 / 66.0, 1e-12);
  EXPECT_NEAR(t.find(4)->modeled_speedup, 33.0 / 19.0, 1e-12);
  // p = 3 does not divide 8 layers: it is still a candidate (uneven split 3/3/2).
  const bool p3_seen = t.find(3) != nullptr ||
                       std::any_of(t.rejected.begin(), t.rejected.end(),
                                   [](const auto& r) { return r.candidate.gpus == 3; });
  EXPECT_TRUE(p3_seen);
  // Counts below the initial one are kept for shrinking (p = 1).
  ASSERT_NE(t.find(1), nullptr);
  EXPECT_LT(t.find(1)->speedup, 1.0);
  double last = 0;
  for (const auto& e : t.entries) {
    if (e.gpus < 2) continue;
    EXPECT_GT(e.speedup, last);
    last = e.speedup;
  }
}

// Every entry can be launched as it stands: its stages cover the L+2 blocks (embedding, L
// pipeline layers, head) exactly once, in order, with the layout's TP and the job's GPU type.
void expect_launchable(const ScaleTable& t, int layers, const std::string& gpu_type) {
  ASSERT_FALSE(t.entries.empty());
  for (const auto& e : t.entries) {
    ASSERT_EQ(static_cast<int>(e.blocks_per_stage.size()), e.config.pp) << e.config.to_string();
    int covered = 0;
    for (int n : e.blocks_per_stage) {
      EXPECT_GE(n, 1) << e.config.to_string();
      covered += n;
    }
    EXPECT_EQ(covered, layers + 2) << e.config.to_string();
    EXPECT_EQ(e.tp_per_stage, std::vector<int>(e.config.pp, e.config.tp));
    EXPECT_EQ(e.gpu_type_per_stage, std::vector<std::string>(e.config.pp, gpu_type));
  }
}

TEST(ScalerScaleTable, EntriesCarryASplitCoveringEveryBlockOnce) {
  ScaleTableParams params;
  params.consistency = Consistency::relaxed;
  params.gpu_type = "H100-80";
  const auto r = build_scale_table(uniform_model(), params);
  ASSERT_TRUE(r.table) << r.error;
  expect_launchable(*r.table, 8, "H100-80");
  // By hand: 8 equal layers on 2 stages split 4/4, so blocks are 1+4 | 4+1.
  const ScaleEntry* initial = r.table->find(2);
  ASSERT_NE(initial, nullptr);
  EXPECT_EQ(initial->blocks_per_stage, (std::vector<int>{5, 5}));
}

TEST(ScalerScaleTable, AHugeCapFactorIsNoCapNotAnOverflow) {
  // uniform_model has 8 layers at pp2: a strict table cannot pass pp8 = 8 GPUs, which is also
  // the default cap (4 x 2), so an unbounded cap gives the default table's entries.
  ScaleTableParams p;
  p.cap_factor = 1e308;
  const auto r = build_scale_table(uniform_model(), p);
  const auto d = build_scale_table(uniform_model(), {});
  ASSERT_TRUE(r.table && d.table) << r.error << d.error;
  EXPECT_EQ(r.table->cap_gpus, std::numeric_limits<int>::max());
  ASSERT_EQ(r.table->entries.size(), d.table->entries.size());
  for (size_t i = 0; i < d.table->entries.size(); ++i)
    EXPECT_EQ(r.table->entries[i].gpus, d.table->entries[i].gpus);
}

TEST(ScalerScaleTable, RelaxedScalesDpOnlyWhereTheBatchDivides) {
  ScaleTableParams p;
  p.consistency = Consistency::relaxed;
  p.cap_gpus = 16;
  const auto r = build_scale_table(uniform_model(8, 12, {1, 2, 1, 1}), p);
  ASSERT_TRUE(r.table) << r.error;
  bool some_dp = false;
  for (const auto& e : r.table->entries) {
    EXPECT_EQ(12 % e.config.dp, 0) << e.config.to_string();
    EXPECT_LE(e.gpus, 16);
    some_dp |= e.config.dp > 1;
  }
  EXPECT_TRUE(some_dp);
}

TEST(ScalerScaleTable, InfeasibleJobsGetAnErrorNotACrash) {
  // Batch 10 not divisible by DP 4.
  auto r = build_scale_table(uniform_model(8, 10, {4, 2, 1, 1}), {});
  EXPECT_FALSE(r.table);
  EXPECT_NE(r.error.find("not divisible"), std::string::npos);
  // Three layers cannot fill four stages.
  r = build_scale_table(uniform_model(3, 8, {1, 4, 1, 1}), {});
  EXPECT_FALSE(r.table);
  EXPECT_NE(r.error.find("exceeds"), std::string::npos);
  // Initial layout out of memory.
  auto m = uniform_model();
  m.layer_static_bytes = 10e9;
  m.gpu_memory_bytes = 20e9;
  r = build_scale_table(m, {});
  EXPECT_FALSE(r.table);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos);
}

TEST(ScalerScaleTable, TableTwoPresetsBuildAndStopAtTheLayerCount) {
  for (const char* name : {"small", "medium", "large"}) {
    const auto m = flextrain_preset(name);
    ASSERT_TRUE(m);
    const auto r = build_scale_table(*m, {});
    ASSERT_TRUE(r.table) << name << ": " << r.error;
    EXPECT_EQ(r.table->cap_gpus, 4 * m->initial.gpus());
    for (const auto& e : r.table->entries) EXPECT_LE(e.config.pp, m->pipeline_layers());
    EXPECT_GT(r.table->entries.back().speedup, 1.5) << name;
  }
  // Small: L = 15 + 2 MTP = 17 > 16 stages, so 4x (PP 16) is reachable in principle.
  EXPECT_EQ(flextrain_preset("small")->pipeline_layers(), 17);
  EXPECT_FALSE(flextrain_preset("huge"));
}

TEST(ScalerScaleTable, TraceJobsMapToTableTwoBands) {
  EXPECT_EQ(model_for_trace_job(32, 32)->name, "small");
  EXPECT_EQ(model_for_trace_job(32, 32)->initial.pp, 4);
  EXPECT_EQ(model_for_trace_job(64, 32)->name, "medium");
  EXPECT_EQ(model_for_trace_job(64, 32)->initial.pp, 4);
  EXPECT_EQ(model_for_trace_job(512, 32)->name, "large");
  EXPECT_FALSE(model_for_trace_job(16, 32));  // below min_gpus
  EXPECT_FALSE(model_for_trace_job(36, 32));  // not a multiple of DP*TP*CP = 8
  EXPECT_FALSE(model_for_trace_job(8 * 18, 32).has_value() &&
               model_for_trace_job(8 * 18, 32)->name == "small");
}
