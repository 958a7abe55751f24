// Predicted vs measured peak memory and iteration time on Sailor's real runs.
//
// Independent numbers: Sailor's Clariden runs (OPT-350M, GH200, Megatron-DeepSpeed) record the
// measured iteration time ("real") and the worst GPU's peak memory ("max_mem"). The model has
// no constant fitted to any one run (docs/planner.md lists the global constants).
// The megatron-runs folder (per-rank max_allocated of Aceso's op-level Megatron fork) is held to
// the same targets with the same model; only the framework options differ, set from what the
// runs are (docs/planner.md, "megatron-runs: two activation layouts").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/data_path.h"
#include "common/text_file.h"
#include "planner/calibration.h"
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/measured_runs_io.h"
#include "planner/model_spec_io.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"
#include "planner/sailor_plan.h"

namespace fp = flotilla::planner;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::filesystem::path& path) { return flotilla::read_text(path); }

struct Stats {
  double sum_abs = 0;
  double max_abs = 0;
  double min_signed = 1e9;
  int n = 0;
  void add(double rel) {
    sum_abs += std::abs(rel);
    max_abs = std::max(max_abs, std::abs(rel));
    min_signed = std::min(min_signed, rel);
    ++n;
  }
  double mean() const { return n ? sum_abs / n : 0; }
};

// Issue 13's targets: memory mean |error| <= 5 % and never under-predicted by more than 5 %;
// time mean |error| within the group's bound.
void expect_issue_targets(const Stats& mem, const Stats& time, double time_mean_bound, const char* group) {
  EXPECT_LE(mem.mean(), 0.05) << group;
  EXPECT_GE(mem.min_signed, -0.05) << group << " memory under-predicted by more than 5% on some run";
  EXPECT_LE(time.mean(), time_mean_bound) << group;
}

struct Fixture {
  fp::ModelSpec model;
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  fp::ProfileSet profiles;
  fp::NetworkModel network;
  fp::ComputeModel compute{&profiles};  // the fixture is never moved, so the pointer holds
  fp::EvalContext ctx{&catalog, &compute, &network};
};

bool load(Fixture& f, std::string& why) {
  auto cfg = flotilla::data_path("sailor/configs/training_config_opt_350.json");
  auto prof = flotilla::data_path("sailor/profiles");
  auto net = flotilla::data_path("sailor/network");
  if (!cfg || !prof || !net) {
    why = flotilla::data_missing_message("sailor/configs, sailor/profiles, sailor/network");
    return false;
  }
  auto m = fp::load_model_spec_file(cfg->string());
  auto p = fp::load_profile_dir(prof->string());
  auto n = fp::load_network_dir(net->string());
  if (!m || !p || !n) {
    why = "data present but unreadable: " + m.error() + p.error() + n.error();
    return false;
  }
  f.model = *m;
  f.profiles = std::move(p.value());
  f.network = std::move(n.value());
  return true;
}

// Loads the shared model, profiles and network into `f` and finds the runs folder `relative`;
// the reason to skip when something is missing, else "".
std::string load_runs(Fixture& f, const std::string& relative, fs::path& runs) {
  const auto dir = flotilla::data_path(relative);
  if (!dir) return flotilla::data_missing_message(relative);
  runs = *dir;
  std::string why;
  return load(f, why) ? "" : why;
}

}  // namespace

TEST(PlannerValidation, ClaridenMemoryAndTime) {
  Fixture f;
  fs::path dir;
  if (const std::string why = load_runs(f, "sailor/validation/clariden/OPT-350", dir); !why.empty())
    GTEST_SKIP() << why;
  const fp::EvalContext& ctx = f.ctx;
  Stats mem;
  Stats time;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  std::printf("%-32s %9s %9s %7s %9s %9s %7s\n", "plan", "mem_pred", "mem_real", "err%", "t_pred", "t_real", "err%");
  for (const fs::path& file : files) {
    auto plan = fp::parse_sailor_plan(slurp(file), f.model.num_blocks());
    ASSERT_TRUE(plan.ok()) << file << ": " << plan.error();
    const fp::Evaluation ev = fp::evaluate(plan->plan, f.model, ctx);
    ASSERT_TRUE(ev.feasible()) << file << ": " << ev.infeasible->message;
    ASSERT_EQ(static_cast<int>(ev.ranks.size()), plan->plan.num_gpus());
    const double mem_real = static_cast<double>(*plan->measured_max_mem_bytes);
    const double mem_err = (static_cast<double>(ev.peak_bytes_max) - mem_real) / mem_real;
    const double t_real = *plan->measured_iter_seconds;
    const double t_err = (ev.iter_seconds - t_real) / t_real;
    mem.add(mem_err);
    time.add(t_err);
    if (std::getenv("FLOTILLA_DEBUG")) {
      for (const auto& st : ev.stages) {
        std::printf("  stage %d blocks [%d,%d) fwd %.4f bwd %.4f p2p %.4f sync %.4f upd %.4f inflight %d\n", st.stage,
                    st.first_block, st.last_block, st.timing.forward_s, st.timing.backward_s, st.timing.p2p_s,
                    st.timing.dp_sync_s, st.timing.update_s, st.in_flight_micro_batches);
      }
      std::printf("  m=%d pipeline %.3f sync %.3f measured sync %.3f\n", ev.num_micro_batches, ev.pipeline_seconds,
                  ev.sync_seconds, plan->measured_sync_seconds.value_or(-1));
    }
    std::printf("%-32s %9.2f %9.2f %+7.1f %9.3f %9.3f %+7.1f\n", file.filename().c_str(), ev.peak_bytes_max / 1e9,
                mem_real / 1e9, 100 * mem_err, ev.iter_seconds, t_real, 100 * t_err);
  }
  std::printf("memory: mean |err| %.1f%%, max |err| %.1f%%, worst under-prediction %.1f%% (n=%d)\n", 100 * mem.mean(),
              100 * mem.max_abs, 100 * std::min(0.0, mem.min_signed), mem.n);
  std::printf("time:   mean |err| %.1f%%, max |err| %.1f%% (n=%d)\n", 100 * time.mean(), 100 * time.max_abs, time.n);
  expect_issue_targets(mem, time, TIME_MEAN_TARGET, "clariden");
}

TEST(PlannerValidation, MegatronRunsPerRankMemory) {
  Fixture f;
  fs::path root;
  if (const std::string why = load_runs(f, "sailor/megatron-runs/configs", root); !why.empty()) GTEST_SKIP() << why;
  root = root.parent_path();
  Stats mem;
  Stats reserved;
  Stats time;
  const fp::EvalContext& ctx = f.ctx;
  // read_megatron_runs() (planner/measured_runs_io.h) builds each run's plan with the runs'
  // framework options (Aceso's op-level runtime, fp32 unfused softmax) and each stage's exact
  // op split; time is layer-granular (a split layer goes to the stage holding its score ops).
  const auto runs = fp::read_megatron_runs(root, f.model);
  ASSERT_FALSE(runs.empty());
  for (const fp::MegatronRun& run : runs) {
    if (run.measured_iter_seconds > 0) {
      // Measured: the slowest rank's iteration time ("time", ms) in the run's time CSVs.
      const fp::Evaluation ev = fp::evaluate(run.plan, f.model, ctx);
      if (ev.feasible()) {
        const double err = (ev.iter_seconds - run.measured_iter_seconds) / run.measured_iter_seconds;
        time.add(err);
        std::printf("%-26s time: predicted %.3f s, measured %.3f s, %+6.1f%%\n", run.name.c_str(), ev.iter_seconds,
                    run.measured_iter_seconds, 100 * err);
      }
    }
    for (std::size_t s = 0; s < run.stages.size(); ++s) {
      const fp::MegatronStage& st = run.stages[s];
      const double worst = st.max_allocated_bytes;
      const double worst_reserved = st.max_reserved_bytes;
      if (worst <= 0) continue;
      const auto pred = fp::stage_memory(f.model, st.shape);
      // max_allocated excludes the allocator's fragmentation (reserved - allocated), so it is
      // compared with the peak less the model's fragmentation term.
      const double err = (static_cast<double>(pred.peak_bytes - pred.overhead_bytes) - worst) / worst;
      mem.add(err);
      // Informational: the allocator's fragmentation term (calibrated on Clariden) against
      // these runs' max_reserved, which includes it.
      const double reserved_err =
          worst_reserved > 0 ? (static_cast<double>(pred.peak_bytes) - worst_reserved) / worst_reserved : 0;
      if (worst_reserved > 0) reserved.add(reserved_err);
      std::printf(
          "%-26s stage %zu: predicted %6.2f GB, max_allocated %6.2f GB, %+6.1f%%; with fragmentation %6.2f GB, "
          "max_reserved %6.2f GB, %+6.1f%%\n",
          run.name.c_str(), s, (pred.peak_bytes - pred.overhead_bytes) / 1e9, worst / 1e9, 100 * err,
          pred.peak_bytes / 1e9, worst_reserved / 1e9, 100 * reserved_err);
    }
  }
  ASSERT_GT(mem.n, 0);
  std::printf(
      "megatron-runs memory (max_allocated, no runtime overhead): mean |err| %.1f%%, max |err| %.1f%%, worst %.1f%%\n",
      100 * mem.mean(), 100 * mem.max_abs, 100 * mem.min_signed);
  std::printf(
      "megatron-runs memory incl. fragmentation vs max_reserved (informational): mean |err| %.1f%%, max |err| "
      "%.1f%%, worst %.1f%%\n",
      100 * reserved.mean(), 100 * reserved.max_abs, 100 * reserved.min_signed);
  if (time.n > 0) {
    std::printf("megatron-runs iteration time: mean |err| %.1f%%, max |err| %.1f%% (n=%d)\n", 100 * time.mean(),
                100 * time.max_abs, time.n);
  }
  // The issue's targets, with the runs' framework options (op-level runtime, fp32 softmax).
  expect_issue_targets(mem, time, MEGATRON_TIME_MEAN_BOUND, "megatron-runs");
}

// The two memory constants fitted to runs (allocator fraction, GH200 CUDA context) are what
// fit_memory_overheads() gives on the 15 Clariden runs and nothing else (docs/planner.md,
// "Runtime overheads"); bench/planner_accuracy reports the leave-one-group-out errors.
TEST(PlannerValidation, CatalogMemoryConstantsMatchClaridenFit) {
  Fixture f;
  fs::path dir;
  if (const std::string why = load_runs(f, "sailor/validation/clariden/OPT-350", dir); !why.empty())
    GTEST_SKIP() << why;
  const fp::EvalContext& ctx = f.ctx;
  std::vector<fp::MemoryFitSample> samples;
  for (const fp::SailorRun& run : fp::read_sailor_plan_group(dir, f.model)) {
    ASSERT_TRUE(run.plan) << run.name << ": " << run.refused_because;
    const fp::Evaluation ev = fp::evaluate(*run.plan, f.model, ctx);
    samples.push_back(fp::memory_fit_sample(ev, run.measured_max_mem_bytes, "clariden"));
  }
  ASSERT_EQ(samples.size(), 15u);
  const fp::MemoryOverheadFit fit = fp::fit_memory_overheads(samples);
  ASSERT_EQ(fit.cuda_context_bytes.count("GH200-96"), 1u);
  std::printf("fit: allocator fraction %.4f, GH200 context %.3f GB\n", fit.allocator_fraction,
              fit.cuda_context_bytes.at("GH200-96") / 1e9);
  EXPECT_NEAR(fp::default_memory_constants().allocator_fraction, fit.allocator_fraction, 0.001);
  EXPECT_NEAR(static_cast<double>(f.catalog.find("GH200-96")->cuda_context_bytes),
              fit.cuda_context_bytes.at("GH200-96"), 0.01e9);
}

// llm_info.json's per-layer act_mem_* are not bytes of a Megatron layer: for OPT-350 at every
// TP, act_mem_floats is exactly the element count (3 + 8/t)·s·h + a·s²/t (mbs 1), i.e. saved
// tensors' elements with one score-sized tensor and no dropout masks, and act_mem_bytes is 4 B
// per element although the runs train in fp16. So the memory model keeps the analytic
// (Korthikanti) count everywhere (docs/planner.md, "Activation bytes: which source").
TEST(PlannerValidation, LlmInfoActivationsAreElementCounts) {
  auto path = flotilla::data_path("sailor/llm_info.json");
  if (!path) GTEST_SKIP() << flotilla::data_missing_message("sailor/llm_info.json");
  const nlohmann::json info = nlohmann::json::parse(slurp(*path));
  const double s = 2048, h = 1024, a = 16;
  for (const auto& [tp, layers] : info.at("OPT-350").items()) {
    const double t = std::stod(tp);
    const auto& layer = layers.at("1");
    const double floats = layer.at("act_mem_floats").get<double>();
    EXPECT_NEAR(floats / ((3 + 8 / t) * s * h + a * s * s / t), 1.0, 0.01) << "TP " << tp;
    EXPECT_DOUBLE_EQ(layer.at("act_mem_bytes").get<double>(), 4 * floats) << "TP " << tp;
  }
}
