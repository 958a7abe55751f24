// The cluster-wide allocator pass, on hand-built scale tables with hand-computed outcomes.
#include "scaler/allocator.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fs = flotilla::scaler;

namespace {

// Initial layout dp2 (2 GPUs); entries 2, 4, 6, 8 GPUs with speedups 1, 1.8, 2.4, 2.9; cap 8.
fs::ScaleTable table() {
  fs::ScaleTable t;
  t.initial = {2, 1, 1, 1};
  t.cap_gpus = 8;
  const double speedups[] = {1.0, 1.8, 2.4, 2.9};
  for (int i = 0; i < 4; ++i) {
    fs::ScaleEntry e;
    e.gpus = 2 * (i + 1);
    e.config = {2, i + 1, 1, 1};
    e.speedup = speedups[i];
    t.entries.push_back(e);
  }
  return t;
}

fs::AllocatorJob job(std::string key, bool running, int gpus, const fs::ScaleTable* t, int priority = 0,
                     int arrival = 0) {
  fs::AllocatorJob j;
  j.key = std::move(key);
  j.running = running;
  j.current_gpus = running ? gpus : 0;
  j.initial_gpus = running ? 2 : gpus;
  j.table = t;
  j.priority = priority;
  j.arrival_order = arrival;
  j.overhead_s = 30;
  return j;
}

const fs::AllocatorDecision& of(const std::vector<fs::AllocatorDecision>& ds, const std::string& key) {
  for (const auto& d : ds)
    if (d.key == key) return d;
  throw std::runtime_error("no decision for " + key);
}

}  // namespace

TEST(Allocator, AdmitsByPriorityThenArrivalAndQueuesTheRest) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 4}};
  in.jobs = {job("a", false, 2, &t, 0, 1), job("b", false, 4, &t, 5, 2), job("c", false, 2, &t, 0, 3)};
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "b").action, fs::AllocAction::kAdmit);  // priority 5 goes first, takes all 4
  EXPECT_EQ(of(ds, "b").target_gpus, 4);
  EXPECT_EQ(of(ds, "a").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "a").queue_position, 1);
  EXPECT_EQ(of(ds, "c").queue_position, 2);
}

// A job no plan serves waits with the table's line and reason code (FitsNowhere unless the
// operator names another, e.g. MegatronCannotRun), and does not block the jobs behind it.
TEST(Allocator, AJobWithoutAPlanWaitsWithItsReasonAndBlocksNobody) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 4}};
  fs::AllocatorJob none = job("none", false, 0, nullptr, 0, 1), megatron = job("megatron", false, 0, nullptr, 0, 2);
  none.fits_nowhere_why = "the model does not fit";
  megatron.fits_nowhere_why = "Megatron-LM cannot run the chosen plan: ...";
  megatron.fits_nowhere_reason = "MegatronCannotRun";
  in.jobs = {none, megatron, job("c", false, 2, &t, 0, 3)};
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "none").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "none").reason_code, "FitsNowhere");
  EXPECT_EQ(of(ds, "none").reason, "the model does not fit");
  EXPECT_EQ(of(ds, "megatron").reason_code, "MegatronCannotRun");
  EXPECT_EQ(of(ds, "megatron").reason, "Megatron-LM cannot run the chosen plan: ...");
  EXPECT_EQ(of(ds, "c").action, fs::AllocAction::kAdmit);
}

TEST(Allocator, ScaleUpPassesWhenNoJobsArriveAndIsRefusedWhenTheyArriveOften) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  in.jobs = {job("r", true, 2, &t)};
  in.arrival_rate_per_s = 0;  // λ = 0: any speedup > 1 passes
  auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "r").target_gpus, 8);  // the best entry within 2 + 6
  ASSERT_TRUE(of(ds, "r").benefit);
  // λ = 0.1/s: S = 2.9, required idle = 2.9 / 1.9 x 30 s = 45.79 s, P = exp(-4.579) = 0.0103.
  in.arrival_rate_per_s = 0.1;
  ds = fs::allocate(in);
  const auto& d = of(ds, "r");
  EXPECT_EQ(d.action, fs::AllocAction::kKeep);
  EXPECT_EQ(d.reason_code, "BenefitCheckRefused");
  ASSERT_TRUE(d.benefit);
  EXPECT_NEAR(d.benefit->required_idle_s, 2.9 / 1.9 * 30, 1e-9);
  EXPECT_NEAR(d.benefit->probability, std::exp(-0.1 * 2.9 / 1.9 * 30), 1e-12);
}

// A job about to finish is not restarted for speed it would not live to use: scaled up with
// speedup S after a restart of T_o, R seconds of training take T_o + R/S, which is less than R
// only when R > S/(S-1)·T_o. With λ = 0 the Poisson check passes; S = 2.9, T_o = 30 s:
// break-even 2.9 / 1.9 x 30 = 45.79 s.
TEST(Allocator, AJobThatFinishesBeforeTheRestartRepaysItselfIsNotScaledUp) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  in.arrival_rate_per_s = 0;
  in.jobs = {job("r", true, 2, &t)};
  in.jobs[0].remaining_s = 45.0;
  auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "r").reason_code, "EndsBeforeRestartRepays");
  ASSERT_TRUE(of(ds, "r").benefit);
  EXPECT_TRUE(of(ds, "r").benefit->scale_up) << "the Poisson check's own answer is kept";
  EXPECT_NEAR(of(ds, "r").benefit->required_idle_s, 2.9 / 1.9 * 30, 1e-9);
  EXPECT_NE(of(ds, "r").reason.find("needs more than 45.8 s of training left"), std::string::npos)
      << of(ds, "r").reason;
  // The reason does not move with the seconds left (one status write and event per change).
  const std::string reason = of(ds, "r").reason;
  in.jobs[0].remaining_s = 30.0;
  EXPECT_EQ(of(fs::allocate(in), "r").reason, reason);
  // The GPUs it did not take go to the next grower.
  const auto t2 = table();
  in.jobs.push_back(job("s", true, 2, &t2));
  in.jobs[1].arrival_order = 1;
  in.free_gpus_by_type = {{"A100-80", 6}};
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "s").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "s").target_gpus, 8);
  in.jobs.pop_back();
  in.jobs[0].remaining_s = 46.0;
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "r").target_gpus, 8);
  // The greedy baseline (no benefit check) scales regardless, as before.
  in.jobs[0].remaining_s = 1.0;
  in.use_benefit_check = false;
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kGrow);
}

TEST(Allocator, AJobsOwnArrivalRateOverridesTheClusterRate) {
  // The cluster's λ = 0 would pass any speedup; the job's own window saw 0.1 arrivals/s, so
  // its check uses that: P = exp(-0.1 x 2.9 / 1.9 x 30 s) = 0.0103 < 0.6, refused.
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  in.arrival_rate_per_s = 0;
  in.jobs = {job("r", true, 2, &t)};
  in.jobs[0].arrival_rate_per_s = 0.1;
  auto ds = fs::allocate(in);
  ASSERT_TRUE(of(ds, "r").benefit);
  EXPECT_EQ(of(ds, "r").reason_code, "BenefitCheckRefused");
  EXPECT_NEAR(of(ds, "r").benefit->probability, std::exp(-0.1 * 2.9 / 1.9 * 30), 1e-12);
  // And the other way: a busy cluster window, a quiet job window (λ = 0): it grows.
  in.arrival_rate_per_s = 0.1;
  in.jobs[0].arrival_rate_per_s = 0.0;
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "r").target_gpus, 8);
}

TEST(Allocator, NobodyGrowsWhileAJobWaits) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  in.jobs = {job("r", true, 2, &t, 0, 1), job("w", false, 8, &t, 0, 2)};
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "w").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);  // r holds only its initial 2: nothing to reclaim
}

TEST(Allocator, AWaitingJobReclaimsScaledUpGpusFromNoHigherPriority) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 0}};
  in.jobs = {job("r", true, 8, &t, 0, 1), job("w", false, 4, &t, 1, 2)};
  auto ds = fs::allocate(in);
  // Needs 4; r holds 8 with initial 2; the best entry leaving 4 free is 4 GPUs.
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kShrink);
  EXPECT_EQ(of(ds, "r").target_gpus, 4);
  EXPECT_EQ(of(ds, "r").reason_code, "Preempted");
  EXPECT_EQ(of(ds, "w").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "w").reason_code, "Preempting");
  // A victim of higher priority keeps its GPUs.
  in.jobs[0].priority = 2;
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "w").reason_code, "WaitingForGpus");
}

TEST(Allocator, PreemptionOffLeavesScaledUpJobsAlone) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 0}};
  in.jobs = {job("r", true, 8, &t, 0, 1), job("w", false, 4, &t, 1, 2)};
  in.allow_preemption = false;
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "w").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "w").reason_code, "WaitingForGpus");
}

TEST(Allocator, LostGpusShrinkToTheBestEntryLeftOrRequeue) {
  const auto t = table();
  fs::AllocatorInput in;
  auto r = job("r", true, 6, &t);
  r.gpus_alive = 3;  // best entry within 3: 2 GPUs
  in.jobs = {r};
  auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kShrink);
  EXPECT_EQ(of(ds, "r").target_gpus, 2);
  in.jobs[0].gpus_alive = 1;  // no entry fits 1 GPU
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kRequeue);
  EXPECT_EQ(of(ds, "r").target_gpus, 0);
}

TEST(Allocator, MinimumIntervalAndElasticityOffKeep) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  auto recent = job("recent", true, 2, &t);
  recent.seconds_since_rescale = 10;
  recent.min_rescale_interval_s = 60;
  auto fixed = job("fixed", true, 2, &t);
  fixed.elastic = false;
  in.jobs = {recent, fixed};
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "recent").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "recent").reason_code, "MinInterval");
  EXPECT_EQ(of(ds, "fixed").action, fs::AllocAction::kKeep);
}

TEST(Allocator, AllowedTypesLimitWhatAJobCanTake) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 2}, {"V100-16", 8}};
  auto a = job("a100-only", false, 4, &t);
  a.gpu_types = {"A100-80"};
  auto any = job("any", false, 4, &t, 0, 1);
  in.jobs = {a, any};
  const auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "a100-only").action, fs::AllocAction::kWait);  // only 2 A100s free
  EXPECT_EQ(of(ds, "any").action, fs::AllocAction::kAdmit);       // backfills on V100s
}

// GPUs free on nodes a job's pods could not start on (operator/unavailable_nodes.h) are not the
// job's: it is not grown onto them, nor admitted on them, while another job may take them.
TEST(Allocator, GpusAJobMustNotUseAreLeftToOthers) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 6}};
  auto r = job("r", true, 2, &t);
  r.unusable_free_gpus_by_type = {{"A100-80", 4}};
  in.jobs = {r};
  auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "r").target_gpus, 4) << "2 held + the 2 free it may use (6 free, 4 of them not its)";
  r.unusable_free_gpus_by_type = {{"A100-80", 6}, {"V100-16", 3}};
  in.jobs = {r};
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "r").action, fs::AllocAction::kKeep);
  // A waiting job with the same exclusion waits; the next in line is admitted on those GPUs.
  auto w = job("w", false, 2, &t, 0, 1);
  w.unusable_free_gpus_by_type = {{"A100-80", 5}};
  in.jobs = {w, job("next", false, 6, &t, 0, 2)};
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "w").action, fs::AllocAction::kWait);
  EXPECT_EQ(of(ds, "w").reason.rfind("needs 2 GPUs, 1 free of its types", 0), 0u) << of(ds, "w").reason;
  EXPECT_EQ(of(ds, "next").action, fs::AllocAction::kAdmit);
  EXPECT_EQ(of(ds, "next").target_gpus, 6);
}

// A job whose last granted scale-up planned to the plan it runs (may_grow false: the operator's
// status.declinedScaleUp) is offered none, so the free GPUs go to the next grower instead of
// being held back by it every pass.
TEST(Allocator, AJobThatDeclinedAScaleUpLeavesTheFreeGpusToOthers) {
  const auto t = table();
  fs::AllocatorInput in;
  in.free_gpus_by_type = {{"A100-80", 2}};
  auto declined = job("declined", true, 2, &t);
  auto other = job("other", true, 4, &t, 0, 1);
  in.jobs = {declined, other};
  auto ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "declined").action, fs::AllocAction::kGrow) << "fewest GPUs first";
  EXPECT_EQ(of(ds, "other").action, fs::AllocAction::kKeep);
  in.jobs[0].may_grow = false;
  ds = fs::allocate(in);
  EXPECT_EQ(of(ds, "declined").action, fs::AllocAction::kKeep);
  EXPECT_EQ(of(ds, "other").action, fs::AllocAction::kGrow);
  EXPECT_EQ(of(ds, "other").target_gpus, 6);
}
