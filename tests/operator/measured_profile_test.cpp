// Online profiling: measured stage seconds in the pods' reports become a planner profile whose
// block times are the FLOP estimate times measured/predicted, and plans made with it are timed
// accordingly. Expected numbers come from ComputeModel::estimate_block_times (FLOPs / peak),
// not from the code under test.
#include "operator/measured_profile.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
namespace fp = flotilla::planner;
using flotilla::op::testing::job_object;
using flotilla::op::testing::node;
using flotilla::op::testing::spec_of;
using flotilla::op::testing::World;

namespace {

struct Running {
  World world;
  fo::JobSpec spec = spec_of(job_object());
  fp::ModelSpec model = *fo::planner_model(spec);
  fo::JobPlan plan;
  Running() {
    fo::ClusterView cluster{{node("n0", 2), node("n1", 2)}};
    fo::PlanConstraints limits;
    limits.min_gpus = limits.max_gpus = 4;
    limits.dp = 1;  // four pipeline stages, each measured
    plan = *fo::plan_job(spec, cluster.snapshot_for(spec.key()), limits, world.context(), 3).plan;
  }
  // FLOP estimate of one stage's forward and backward per micro-batch.
  std::pair<double, double> estimate(const fo::PlanStage& s) const {
    double f = 0, b = 0;
    for (int k = s.first_block; k <= s.last_block; ++k) {
      const auto t = fp::ComputeModel::estimate_block_times(model, *world.catalog.find(s.gpu_type), k, s.tp,
                                                            plan.micro_batch_size);
      f += t.forward_s;
      b += t.backward_s;
    }
    return {f, b};
  }
  // One report per stage of `epoch`, with the estimate scaled by (fwd, bwd).
  std::vector<flotilla::PodReport> reports(double fwd, double bwd, std::int64_t epoch) const {
    std::vector<flotilla::PodReport> out;
    for (std::size_t i = 0; i < plan.stages.size(); ++i) {
      flotilla::PodReport r;
      r.epoch = epoch;
      const auto [f, b] = estimate(plan.stages[i]);
      r.stage_seconds.push_back({static_cast<int>(i), f * fwd, b * bwd});
      out.push_back(r);
    }
    return out;
  }
};

}  // namespace

TEST(MeasuredProfile, RatiosAreMeasuredOverPredictedAndTheProfileCarriesThem) {
  Running run;
  ASSERT_EQ(run.plan.pp, 4);
  const auto measured =
      fo::measure_profile(run.model, run.plan, run.reports(3.0, 0.5, 3), *run.world.context().compute, run.world.catalog);
  ASSERT_TRUE(measured);
  ASSERT_EQ(measured->ratios.size(), 1u);
  EXPECT_NEAR(measured->ratios[0].forward, 3.0, 1e-9);
  EXPECT_NEAR(measured->ratios[0].backward, 0.5, 1e-9);
  EXPECT_EQ(measured->signature, "emu-slow:f3,b0.5");
  // Block times through a ComputeModel on the measured profile: 3x / 0.5x the FLOP estimate.
  fp::ProfileSet set;
  for (auto p : measured->profiles) set.add(std::move(p));
  const fp::ComputeModel folded(&set);
  const fp::GpuType& gpu = *run.world.catalog.find("emu-slow");
  for (int b = 0; b < run.model.num_blocks(); ++b) {
    const auto want = fp::ComputeModel::estimate_block_times(run.model, gpu, b, 1, run.plan.micro_batch_size);
    const auto got = folded.block_times(run.model, gpu, b, 1, run.plan.micro_batch_size);
    EXPECT_NEAR(got.forward_s, 3.0 * want.forward_s, 1e-9 * want.forward_s) << "block " << b;
    EXPECT_NEAR(got.backward_s, 0.5 * want.backward_s, 1e-9 * want.backward_s) << "block " << b;
  }
}

TEST(MeasuredProfile, PlansMadeWithTheMeasuredProfileAreTimedByIt) {
  Running run;
  const auto measured =
      fo::measure_profile(run.model, run.plan, run.reports(3.0, 3.0, 3), *run.world.context().compute, run.world.catalog);
  ASSERT_TRUE(measured);
  fp::ProfileSet set;
  for (auto p : measured->profiles) set.add(std::move(p));
  const fp::ComputeModel folded(&set);
  fp::EvalContext context = run.world.context();
  context.compute = &folded;
  fo::ClusterView cluster{{node("n0", 2), node("n1", 2)}};
  fo::PlanConstraints limits;
  limits.min_gpus = limits.max_gpus = 4;
  limits.dp = 1;
  const auto again = fo::plan_job(run.spec, cluster.snapshot_for(run.spec.key()), limits, context, 4).plan;
  ASSERT_TRUE(again);
  // At 0.001 TFLOP/s compute is nearly all of the iteration: three times the compute is close
  // to three times the iteration (the optimizer update and the links are not scaled).
  const double ratio = again->iteration_seconds / run.plan.iteration_seconds;
  EXPECT_GT(ratio, 2.5);
  EXPECT_LE(ratio, 3.0 + 1e-9);
}

TEST(MeasuredProfile, HalfAMeasurementMovesNothing) {
  Running run;
  const auto& compute = *run.world.context().compute;
  auto reports = run.reports(2, 2, 3);
  reports.pop_back();  // the last stage has not reported
  EXPECT_FALSE(fo::measure_profile(run.model, run.plan, reports, compute, run.world.catalog));
  EXPECT_FALSE(fo::measure_profile(run.model, run.plan, run.reports(2, 2, 2), compute, run.world.catalog))
      << "reports of an older epoch measured another layout";
  reports = run.reports(2, 2, 3);
  reports[0].stage_seconds[0].forward_s = std::nan("");
  EXPECT_FALSE(fo::measure_profile(run.model, run.plan, reports, compute, run.world.catalog));
  // A wild measurement is clamped, so one report cannot move the table without bound.
  const auto wild = fo::measure_profile(run.model, run.plan, run.reports(1e6, 1e-9, 3), compute, run.world.catalog);
  ASSERT_TRUE(wild);
  EXPECT_EQ(wild->ratios[0].forward, fo::kMaxMeasuredRatio);
  EXPECT_EQ(wild->ratios[0].backward, fo::kMinMeasuredRatio);
}
