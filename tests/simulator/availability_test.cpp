// The availability replay (one job, a GPU pool that follows a trace): hand-computed tiny traces
// with the planner's own throughputs, and invariants on Sailor's three real A100 traces.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/data_path.h"
#include "planner/model_spec.h"
#include "simulator/availability_replay.h"
#include "simulator/availability_table.h"
#include "simulator/sailor_job_loader.h"
#include "simulator/trace_loader.h"

using namespace flotilla;
using namespace flotilla::scaler;
using namespace flotilla::simulator;
namespace fs = std::filesystem;

namespace {

// Samples per second of the table's best plan within `gpus`, at the tests' global batch of 2048.
double samples_per_s(const flotilla::scaler::ScaleTable& t, int gpus) { return 2048 / t.best_within(gpus)->iteration_s; }

// The planner's table for `model` on A100-40 with Sailor's measured profiles and network fits.
// Empty (with the reason in *skip) when the data is absent.
std::optional<AvailabilityTable> planner_table(const char* model, int max_gpus, std::string* skip,
                                               int gbs = 2048) {
  const auto prof = flotilla::data_path("sailor/profiles");
  const auto net = flotilla::data_path("sailor/network");
  if (!prof || !net) {
    *skip = flotilla::data_missing_message(!prof ? "sailor/profiles" : "sailor/network");
    return std::nullopt;
  }
  const auto loaded = load_sailor_planner_job(model, "A100-40", gbs, prof->string(), net->string());
  EXPECT_TRUE(loaded.error.empty()) << loaded.error;
  if (!loaded.error.empty()) {
    *skip = loaded.error;
    return std::nullopt;
  }
  EXPECT_TRUE(loaded.profiled) << "the replay should use a measured profile";
  const PlannerJob& job = loaded.job;
  auto t = build_availability_table(job, max_gpus);
  EXPECT_TRUE(t.table) << t.error;
  if (!t.table) return std::nullopt;
  return t;
}

AvailabilityReplayParams params(AvailabilityPolicy p, std::optional<double> restart_s, double p_th,
                                double window_s) {
  AvailabilityReplayParams r;
  r.policy = p;
  r.restart_s = restart_s;
  r.benefit.threshold_probability = p_th;
  r.window_s = window_s;
  r.global_batch = 2048;
  r.overhead.gpus_per_node = 4;
  return r;
}

constexpr auto kStatic = AvailabilityPolicy::static_start;
constexpr auto kGreedy = AvailabilityPolicy::greedy;
constexpr auto kFlex = AvailabilityPolicy::flextrain;

}  // namespace

TEST(ScalerAvailabilityTable, OnePlannerPlanPerCountFromTheProfile) {
  std::string skip;
  const auto at = planner_table("OPT-350", 16, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  EXPECT_EQ(t.cap_gpus, 16);
  EXPECT_EQ(t.initial.gpus(), 1);  // OPT-350M fits one A100-40
  // Every count 1..16 has a plan (DP x PP re-chosen per count, PP up to 26 blocks).
  for (int g = 1; g <= 16; ++g) {
    const auto* e = t.find(g);
    ASSERT_NE(e, nullptr) << g;
    EXPECT_EQ(e->config.gpus(), g);
    EXPECT_EQ(2048 % e->config.dp, 0);
    EXPECT_GT(e->iteration_s, 0);
  }
  // More GPUs are faster overall (the planner may plateau between neighbours, not over 2x).
  EXPECT_LT(t.find(8)->iteration_s, t.find(4)->iteration_s);
  EXPECT_LT(t.find(16)->iteration_s, t.find(8)->iteration_s);
}

// `profiled` names the profile the planner actually uses: the catalog name or any alias of the
// type finds Sailor's folder (GH200-96 -> GH-96, a100 -> A100-40), and a type Sailor never
// profiled (H100-80) is the FLOP estimate. The names that find the same profile give the same
// iteration time, so the flag describes what the planner used.
TEST(ScalerSailorJobLoader, ProfiledFollowsTheCatalogAliasesAsThePlannerDoes) {
  const auto prof = flotilla::data_path("sailor/profiles");
  const auto net = flotilla::data_path("sailor/network");
  if (!prof || !net) GTEST_SKIP() << flotilla::data_missing_message("sailor/profiles");
  auto iteration_s = [&](const char* gpu, bool* profiled) {
    const auto l = load_sailor_planner_job("OPT-350", gpu, 2048, prof->string(), net->string());
    EXPECT_TRUE(l.error.empty()) << l.error;
    *profiled = l.profiled;
    const auto pp = make_planner_predictor(l.job);
    EXPECT_TRUE(pp.error.empty()) << pp.error;
    return pp.predictor(ParallelConfig{1, 1, 1, 1}).iteration_s;
  };
  bool p_gh96 = false, p_gh200 = false, p_gh200_lower = false, p_a100 = false, p_a100_40 = false,
       p_h100 = true;
  const double gh96 = iteration_s("GH-96", &p_gh96);
  EXPECT_TRUE(p_gh96);
  EXPECT_DOUBLE_EQ(iteration_s("GH200-96", &p_gh200), gh96);
  EXPECT_TRUE(p_gh200);
  EXPECT_DOUBLE_EQ(iteration_s("gh200", &p_gh200_lower), gh96);
  EXPECT_TRUE(p_gh200_lower);
  EXPECT_DOUBLE_EQ(iteration_s("a100", &p_a100), iteration_s("A100-40", &p_a100_40));
  EXPECT_TRUE(p_a100);
  EXPECT_TRUE(p_a100_40);
  iteration_s("H100-80", &p_h100);
  EXPECT_FALSE(p_h100);
}

// --gpus-per-node reaches the planner: on 8-GPU A100-40 nodes OPT-350M's DP-8 all-reduce stays
// on NVLink (300 GB/s) instead of the 12.5 GB/s inter-node link of the catalog's 4-GPU nodes, so
// the same dp8 layout iterates faster; a 4-GPU layout, inside one node either way, is unchanged.
TEST(ScalerAvailabilityTable, NodeSizeReachesThePlannersNetworkModel) {
  const auto prof = flotilla::data_path("sailor/profiles");
  const auto net = flotilla::data_path("sailor/network");
  if (!prof || !net) GTEST_SKIP() << flotilla::data_missing_message("sailor/profiles");
  auto loaded = load_sailor_planner_job("OPT-350", "A100-40", 2048, prof->string(), net->string());
  ASSERT_TRUE(loaded.error.empty()) << loaded.error;
  const auto four = make_planner_predictor(loaded.job);
  loaded.job.gpus_per_node = 8;
  const auto eight = make_planner_predictor(loaded.job);
  ASSERT_TRUE(four.error.empty() && eight.error.empty());
  const ParallelConfig dp8{8, 1, 1, 1}, dp4{4, 1, 1, 1};
  EXPECT_LT(eight.predictor(dp8).iteration_s, four.predictor(dp8).iteration_s);
  EXPECT_DOUBLE_EQ(eight.predictor(dp4).iteration_s, four.predictor(dp4).iteration_s);
  loaded.job.gpus_per_node = -1;
  EXPECT_FALSE(make_planner_predictor(loaded.job).error.empty());
}

// GPUs 8 -> 4 at 500 s (a drop both policies must follow), back to 8 at 1000 s for only 10 s,
// then 4 until 2000 s. Restart 60 s, P_th 0.95, λ window 600 s. At 1000 s λ = 1 drop / 600 s,
// so P(idle > S/(S-1) x 60 s) = exp(-S/(S-1) / 10) <= exp(-0.1) = 0.905 < 0.95 for any S > 1:
// flextrain refuses; greedy restarts onto 8 and is thrown back 10 s later.
//   both:      [0,500) X8, restart 500..560, X4 until 1000
//   greedy:    restart 1000..1060 (on 8), shrink at 1010, restart 1010..1070, X4 until 2000
//              = 500 X8 + 440 X4 + 930 X4 = 500 X8 + 1370 X4, 3 restarts, 130 s restarting
//   flextrain: X4 from 560 to 2000 = 500 X8 + 1440 X4, 1 restart, 60 s; wins by 70 X4.
TEST(ScalerAvailabilityReplay, ShortGainRefusedByFlextrainWhichWinsByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  const ScaleEntry* b4 = t.best_within(4);
  const ScaleEntry* b8 = t.best_within(8);
  ASSERT_TRUE(b4 && b8);
  ASSERT_GT(b8->gpus, 4);
  const double x4 = 2048 / b4->iteration_s, x8 = 2048 / b8->iteration_s;
  ASSERT_GT(x8, x4);
  const std::vector<AvailabilityPoint> trace = {{0, 8}, {500, 4}, {1000, 8}, {1010, 4}, {2000, 4}};
  const auto g = replay_availability(trace, t, params(kGreedy, 60, 0.95, 600));
  const auto f = replay_availability(trace, t, params(kFlex, 60, 0.95, 600));
  EXPECT_TRUE(g.violations.empty());
  EXPECT_TRUE(f.violations.empty());
  EXPECT_NEAR(g.samples, 500 * x8 + 1370 * x4, 1e-6 * g.samples);
  EXPECT_NEAR(f.samples, 500 * x8 + 1440 * x4, 1e-6 * f.samples);
  EXPECT_NEAR(f.samples - g.samples, 70 * x4, 1e-6 * f.samples);
  EXPECT_EQ(g.restarts, 3);
  EXPECT_EQ(f.restarts, 1);
  EXPECT_DOUBLE_EQ(g.restart_time_s, 130);
  EXPECT_DOUBLE_EQ(f.restart_time_s, 60);
  const int n4 = b4->gpus, n8 = b8->gpus;
  EXPECT_NEAR(g.gpu_hours, (n8 * 500.0 + n4 * 500.0 + n8 * 10.0 + n4 * 990.0) / 3600, 1e-9);
  EXPECT_NEAR(f.gpu_hours, (n8 * 500.0 + n4 * 1500.0) / 3600, 1e-9);
  EXPECT_EQ(f.benefit_checks_refused, 1);
  EXPECT_EQ(f.benefit_checks_passed, 0);
  // The refusal is logged with the check's inputs, computed here by hand.
  const AvailabilityDecision* refusal = nullptr;
  for (const auto& d : f.decisions)
    if (d.action == "refused") refusal = &d;
  ASSERT_NE(refusal, nullptr);
  ASSERT_TRUE(refusal->benefit);
  EXPECT_DOUBLE_EQ(refusal->time_s, 1000);
  EXPECT_DOUBLE_EQ(refusal->benefit->arrival_rate_per_s, 1.0 / 600);
  EXPECT_NEAR(refusal->benefit->speedup, x8 / x4, 1e-9);
  EXPECT_DOUBLE_EQ(refusal->benefit->overhead_s, 60);
  const double s = x8 / x4;
  EXPECT_NEAR(refusal->benefit->probability, std::exp(-(1.0 / 600) * s / (s - 1) * 60), 1e-12);
  // Static never grows: same as flextrain here.
  const auto st = replay_availability(trace, t, params(kStatic, 60, 0.95, 600));
  EXPECT_NEAR(st.samples, f.samples, 1e-9 * f.samples);
}

// A gain that lasts: both take it at once (no drop seen yet, λ = 0), static never does.
TEST(ScalerAvailabilityReplay, LongGainTakenByBothByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  const double x4 = samples_per_s(t, 4), x8 = samples_per_s(t, 8);
  const std::vector<AvailabilityPoint> trace = {{0, 4}, {100, 8}, {10000, 8}};
  for (auto p : {kGreedy, kFlex}) {
    const auto r = replay_availability(trace, t, params(p, 60, 0.6, 3600));
    EXPECT_NEAR(r.samples, 100 * x4 + (10000 - 160) * x8, 1e-6 * r.samples) << availability_policy_name(p);
    EXPECT_EQ(r.restarts, 1);
  }
  const auto st = replay_availability(trace, t, params(kStatic, 60, 0.6, 3600));
  EXPECT_NEAR(st.samples, 10000 * x4, 1e-6 * st.samples);
  EXPECT_EQ(st.restarts, 0);
}

// λ comes from past drops only. The same 10-s gain as above but with no earlier drop: the drop
// 10 s later is in the future at decision time, so flextrain takes the gain exactly as greedy.
TEST(ScalerAvailabilityReplay, LambdaSeesOnlyPastDrops) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const std::vector<AvailabilityPoint> trace = {{0, 4}, {100, 8}, {110, 4}, {1000, 4}};
  const auto g = replay_availability(trace, *at->table, params(kGreedy, 60, 0.95, 600));
  const auto f = replay_availability(trace, *at->table, params(kFlex, 60, 0.95, 600));
  EXPECT_DOUBLE_EQ(f.samples, g.samples);
  EXPECT_EQ(f.restarts, 2);
  EXPECT_EQ(f.benefit_checks_passed, 1);
  ASSERT_FALSE(f.decisions.empty());
  for (const auto& d : f.decisions) {
    if (d.benefit) {
      EXPECT_DOUBLE_EQ(d.benefit->arrival_rate_per_s, 0.0);
    }
  }
}

// A refused gain is re-checked at every later row: once the drop leaves the 600-s window (at
// 1100 s, window (500, 1100]) λ = 0 and flextrain takes it, 100 s after greedy:
// greedy - flextrain = 100 (X8 - X4).
TEST(ScalerAvailabilityReplay, RefusedGainIsTakenOnceTheDropLeavesTheWindowByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  const double x4 = samples_per_s(t, 4), x8 = samples_per_s(t, 8);
  const std::vector<AvailabilityPoint> trace = {{0, 8}, {500, 4}, {1000, 8}, {1100, 8}, {5000, 8}};
  const auto g = replay_availability(trace, t, params(kGreedy, 60, 0.95, 600));
  const auto f = replay_availability(trace, t, params(kFlex, 60, 0.95, 600));
  EXPECT_NEAR(g.samples, 500 * x8 + 440 * x4 + (5000 - 1060) * x8, 1e-6 * g.samples);
  EXPECT_NEAR(g.samples - f.samples, 100 * (x8 - x4), 1e-6 * g.samples);
  EXPECT_EQ(f.benefit_checks_refused, 1);
  EXPECT_EQ(f.benefit_checks_passed, 1);
}

// A stopped job pays a restart whatever size it comes back at, so greedy and flextrain come back
// on all that is free (8), static at its start size (4). 4 GPUs to 100 s, none to 200 s, then 8
// to 1000 s, restart 60 s:
//   greedy, flextrain: 100 X4 + (1000 - 260) X8, 1 restart (not: 4 at 200 s, then 8 at 260 s);
//   static:            100 X4 + (1000 - 260) X4, 1 restart.
TEST(ScalerAvailabilityReplay, StoppedJobComesBackOnAllFreeGpusUnlessStaticByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  ASSERT_EQ(t.best_within(4)->gpus, 4);
  ASSERT_EQ(t.best_within(8)->gpus, 8);
  const double x4 = samples_per_s(t, 4), x8 = samples_per_s(t, 8);
  const std::vector<AvailabilityPoint> trace = {{0, 4}, {100, 0}, {200, 8}, {1000, 8}};
  for (auto p : {kGreedy, kFlex}) {
    const auto r = replay_availability(trace, t, params(p, 60, 0.6, 3600));
    EXPECT_NEAR(r.samples, 100 * x4 + 740 * x8, 1e-6 * r.samples) << availability_policy_name(p);
    EXPECT_EQ(r.restarts, 1) << availability_policy_name(p);
    EXPECT_NEAR(r.gpu_hours, (4 * 100.0 + 8 * 800.0) / 3600, 1e-9) << availability_policy_name(p);
  }
  const auto st = replay_availability(trace, t, params(kStatic, 60, 0.6, 3600));
  EXPECT_NEAR(st.samples, 100 * x4 + 740 * x4, 1e-6 * st.samples);
  EXPECT_EQ(st.restarts, 1);
  EXPECT_EQ(st.max_held_gpus, 4);
}

// Static's start size is the size it first ran on, also when nothing fit at the first row:
// 0 GPUs to 100 s, 4 to 200 s, 0 to 300 s, 8 to 1000 s, restart 60 s. It starts on 4 at 100 s
// and comes back on 4 (not 8) at 300 s: (200 - 160) X4 + (1000 - 360) X4 = 680 X4, 2 restarts.
TEST(ScalerAvailabilityReplay, StaticLateStartKeepsItsFirstSizeByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  const auto& t = *at->table;
  ASSERT_EQ(t.best_within(4)->gpus, 4);
  const double x4 = samples_per_s(t, 4);
  const std::vector<AvailabilityPoint> trace = {{0, 0}, {100, 4}, {200, 0}, {300, 8}, {1000, 8}};
  const auto st = replay_availability(trace, t, params(kStatic, 60, 0.6, 3600));
  EXPECT_NEAR(st.samples, 680 * x4, 1e-6 * st.samples);
  EXPECT_EQ(st.restarts, 2);
  EXPECT_EQ(st.max_held_gpus, 4);
  EXPECT_NEAR(st.gpu_hours, (4 * 100.0 + 4 * 700.0) / 3600, 1e-9);
}

// Without --restart-seconds the restart costs the restart_overhead estimate, by hand: OPT-350M's
// checkpoint is 14 B per parameter; 8 -> 4 GPUs on 4-GPU nodes is 2 -> 1 nodes:
// save C / (2 x 2 GB/s) + load C / (1 x 2 GB/s) + init 30 + 0.5 x 1 s.
TEST(ScalerAvailabilityReplay, RestartDefaultsToTheOverheadEstimateByHand) {
  std::string skip;
  const auto at = planner_table("OPT-350", 8, &skip);
  if (!at) GTEST_SKIP() << skip;
  ASSERT_EQ(at->table->best_within(8)->gpus, 8);
  ASSERT_EQ(at->table->best_within(4)->gpus, 4);
  auto p = params(kStatic, std::nullopt, 0.6, 3600);
  p.checkpoint_bytes = at->model.checkpoint_bytes;
  const double c = 14.0 * static_cast<double>(planner::total_params(*planner::find_preset("OPT-350")));
  EXPECT_DOUBLE_EQ(p.checkpoint_bytes, c);
  const auto r = replay_availability({{0, 8}, {100, 4}, {1000, 4}}, *at->table, p);
  EXPECT_EQ(r.restarts, 1);
  EXPECT_NEAR(r.restart_time_s, c / 4e9 + c / 2e9 + 30.5, 1e-9);
}

// Sailor's three A100 traces, both profiled models, three restart costs, every policy:
// never more GPUs than available (checked here from the decision log, independently of the
// replay's own check), samples <= the fastest plan's throughput x time, GPU-hours <= the
// trace's, static never above its start, and the counts of the log add up.
TEST(ScalerAvailabilityReplay, InvariantsOnTheRealTraces) {
  for (const char* name : {"a100_trace.json", "a100_trace_16.json", "a100_trace_original.json"}) {
    const std::string rel = std::string("sailor/availability/") + name;
    const auto path = flotilla::data_path(rel);
    if (!path) GTEST_SKIP() << flotilla::data_missing_message(rel);
    const auto trace = load_availability_trace(path->string());
    ASSERT_TRUE(trace.error.empty()) << trace.error;
    int max_avail = 0;
    for (const auto& p : trace.points) max_avail = std::max(max_avail, p.gpus);
    for (const char* model : {"OPT-350", "GPT-Neo-2.7"}) {
      std::string skip;
      const auto at = planner_table(model, max_avail, &skip);
      if (!at) GTEST_SKIP() << skip;
      const auto& t = *at->table;
      double fastest = 0;
      for (const auto& e : t.entries) fastest = std::max(fastest, entry_samples_per_s(e, 2048));
      auto avail_at = [&](double time) {
        int a = trace.points.front().gpus;
        for (const auto& p : trace.points)
          if (p.time_s <= time) a = p.gpus;
        return a;
      };
      for (double restart : {30.0, 60.0, 120.0}) {
        for (auto pol : {kStatic, kGreedy, kFlex}) {
          const std::string where = std::string(name) + " " + model + " " +
                                    availability_policy_name(pol) + " restart " + std::to_string(restart);
          const auto r = replay_availability(trace.points, t, params(pol, restart, 0.6, 3600));
          EXPECT_TRUE(r.violations.empty()) << where;
          EXPECT_LE(r.max_held_gpus, max_avail) << where;
          EXPECT_LE(r.samples, fastest * r.duration_s * (1 + 1e-12)) << where;
          EXPECT_GT(r.samples, 0) << where;
          EXPECT_LE(r.gpu_hours, r.available_gpu_hours * (1 + 1e-12)) << where;
          int changes = 0;
          for (const auto& d : r.decisions) {
            EXPECT_LE(d.to_gpus, avail_at(d.time_s)) << where << " at " << d.time_s;
            if (d.action != "refused" && d.action != "stop" && d.time_s > trace.points.front().time_s)
              ++changes;
            if (pol == kStatic) {
              EXPECT_NE(d.action, "scale-up") << where;
            }
          }
          EXPECT_EQ(changes, r.restarts) << where;
          for (const auto& row : trace.points) {
            int held = 0;
            for (const auto& d : r.decisions)
              if (d.time_s <= row.time_s && d.action != "refused") held = d.to_gpus;
            EXPECT_LE(held, row.gpus) << where << " row at " << row.time_s;
          }
          EXPECT_LE(r.restart_time_s, r.restarts * restart + 1e-9) << where;
          if (pol == kGreedy) {
            EXPECT_EQ(r.benefit_checks_refused, 0) << where;
          }
        }
      }
    }
  }
}

TEST(ScalerAvailabilityReplay, EmptyOrUnplannableInputIsAnErrorNotACrash) {
  const auto r = replay_availability({}, ScaleTable{}, {});
  EXPECT_EQ(r.samples, 0);
  PlannerJob job;
  job.model = *planner::find_preset("OPT-350");
  job.gpu_type = "A100-40";
  job.global_batch = 2048;
  EXPECT_FALSE(build_availability_table(job, 0).error.empty());
  job.gpu_type = "no-such-gpu";
  EXPECT_NE(build_availability_table(job, 4).error.find("no-such-gpu"), std::string::npos);
  // A model no layout of which fits on 1 GPU: OPT-30B on one A100-40.
  job.model = *planner::find_preset("OPT-30");
  job.gpu_type = "A100-40";
  EXPECT_NE(build_availability_table(job, 1).error.find("fits on 1 GPUs"), std::string::npos);
}

namespace {
fs::path write(const std::string& name, const std::string& text) {
  const auto p = fs::temp_directory_path() /
                 ("flotilla_avail_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p;
}
}  // namespace

TEST(ScalerAvailabilityTrace, LoadsSailorShapeAndRefusesBadRowsInOneLine) {
  auto ok = write("ok.json", R"([{"Time": 0, "GPUs": 4}, {"Time": 63.0, "GPUs": 3}])");
  const auto t = load_availability_trace(ok.string());
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.points.size(), 2u);
  EXPECT_DOUBLE_EQ(t.points[1].time_s, 63);
  EXPECT_EQ(t.points[1].gpus, 3);
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{R"([{"Time": 0, "GPUs": 4}, {"Time": 1e300, "GPUs": 3}])", "row 1"},
                        Case{R"([{"Time": 0, "GPUs": 4}, {"Time": 4e8, "GPUs": 3}])", "10 years"},
                        Case{R"([{"Time": 10, "GPUs": 4}, {"Time": 5, "GPUs": 3}])", "backwards"},
                        Case{R"([{"Time": 0, "GPUs": 2.5}])", "whole number"},
                        Case{R"([{"Time": 0}])", "row 0"},
                        Case{R"({"Time": 0, "GPUs": 1})", "JSON array"},
                        Case{R"([])", "no rows"},
                        Case{R"([{"Time": 0, "GPUs": 4}])", "spans 0 s"},
                        Case{R"([{"Time": 7, "GPUs": 4}, {"Time": 7, "GPUs": 2}])", "spans 0 s"},
                        Case{"not json", "JSON array"}}) {
    auto p = write("bad.json", c.text);
    const auto r = load_availability_trace(p.string());
    EXPECT_NE(r.error.find(c.says), std::string::npos) << c.text << " -> " << r.error;
    EXPECT_NE(r.error.find(p.string()), std::string::npos) << r.error;
    EXPECT_EQ(r.error.find('\n'), std::string::npos);
    fs::remove(p);
  }
  fs::remove(ok);
}

TEST(ScalerTraceLoader, AbsurdDurationsAreRefusedWithFileRowAndLimit) {
  for (const char* dur : {"1e300", "315576001"}) {
    auto p = write("dur.csv", std::string("job_id,submission_time,duration,num_gpu\n"
                                          "a,0,10,4\n"
                                          "b,5,") + dur + ",8\n");
    const auto r = load_trace(p.string());
    EXPECT_NE(r.error.find(p.string()), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("line 3"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("duration"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("315576000"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("10 years"), std::string::npos) << r.error;
    fs::remove(p);
  }
  // Exactly 10 years is accepted; so is an Alibaba pod that ran that long (not: one over it).
  auto p = write("ten.csv", "job_id,submission_time,duration,num_gpu\na,0,315576000,4\n");
  EXPECT_TRUE(load_trace(p.string()).error.empty());
  fs::remove(p);
  auto ali = write("ali.csv",
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                   "creation_time,deletion_time,scheduled_time\n"
                   "p0,1000,100,2,1000,,LS,Running,100,1e300,200\n");
  const auto r = load_trace(ali.string());
  EXPECT_NE(r.error.find("line 2"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("10 years"), std::string::npos) << r.error;
  fs::remove(ali);
}
