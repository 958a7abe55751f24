// Predicted vs measured peak memory and iteration time on Sailor's real runs.
//
// Independent numbers: Sailor's Clariden runs (OPT-350M, GH200, Megatron-DeepSpeed) record the
// measured iteration time ("real") and the worst GPU's peak memory ("max_mem"). The model has
// no constant fitted to any one run (docs/planner.md lists the global constants).
// The megatron-runs folder (per-rank max_allocated) is compared and printed as well; see
// docs/planner.md for why its activation footprint differs and why it is not asserted.
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
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/model_spec_io.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"
#include "planner/sailor_plan.h"

namespace fp = flotilla::planner;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

struct Fixture {
  fp::ModelSpec model;
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  fp::ProfileSet profiles;
  fp::NetworkModel network;
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

}  // namespace

TEST(PlannerValidation, ClaridenMemoryAndTime) {
  Fixture f;
  std::string why;
  auto dir = flotilla::data_path("sailor/validation/clariden/OPT-350");
  if (!dir) GTEST_SKIP() << flotilla::data_missing_message("sailor/validation/clariden/OPT-350");
  if (!load(f, why)) GTEST_SKIP() << why;
  fp::ComputeModel compute(&f.profiles);
  fp::EvalContext ctx{&f.catalog, &compute, &f.network};
  Stats mem;
  Stats time;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(*dir)) {
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
  std::printf("memory: mean |err| %.1f%%, max |err| %.1f%%, worst under-prediction %.1f%% (n=%d)\n",
              100 * mem.mean(), 100 * mem.max_abs, 100 * std::min(0.0, mem.min_signed), mem.n);
  std::printf("time:   mean |err| %.1f%%, max |err| %.1f%% (n=%d)\n", 100 * time.mean(), 100 * time.max_abs, time.n);
  EXPECT_LE(mem.mean(), 0.05);
  EXPECT_GE(mem.min_signed, -0.05) << "memory under-predicted by more than 5% on some run";
  EXPECT_LE(time.mean(), TIME_MEAN_TARGET);
}

TEST(PlannerValidation, MegatronRunsPerRankMemory) {
  Fixture f;
  std::string why;
  auto cfgs = flotilla::data_path("sailor/megatron-runs/configs");
  auto csvs = flotilla::data_path("sailor/megatron-runs/runtime/OPT-350/memory/csv");
  if (!cfgs || !csvs) GTEST_SKIP() << flotilla::data_missing_message("sailor/megatron-runs");
  if (!load(f, why)) GTEST_SKIP() << why;
  Stats mem;
  for (const auto& e : fs::directory_iterator(*cfgs)) {
    const std::string name = e.path().stem().string();  // OPT-350_<nodes>-<gbs>-<dp>-<pp>-<mbs>
    int nodes = 0, gbs = 0, dp = 0, pp = 0, mbs = 0;
    ASSERT_EQ(std::sscanf(name.c_str(), "OPT-350_%d-%d-%d-%d-%d", &nodes, &gbs, &dp, &pp, &mbs), 5) << name;
    const nlohmann::json cfg = nlohmann::json::parse(slurp(e.path()));
    // The runs partition by ops (Aceso format); convert op counts to layer boundaries
    // proportionally (embedding on stage 0, head on the last).
    std::vector<int> ops = cfg["num_ops_in_each_stage"].get<std::vector<int>>();
    int total_ops = 0;
    for (int o : ops) total_ops += o;
    const int L = f.model.num_layers;
    std::vector<int> bounds{0};
    int acc = 0;
    for (int s = 0; s + 1 < pp; ++s) {
      acc += ops[static_cast<std::size_t>(s)];
      bounds.push_back(std::clamp(static_cast<int>(std::lround(1.0 * acc * L / total_ops)) + 1, bounds.back() + 1, L));
    }
    bounds.push_back(L + 2);
    const int m = gbs / (dp * mbs);
    for (int s = 0; s < pp; ++s) {
      fp::StageShape shape{bounds[static_cast<std::size_t>(s)], bounds[static_cast<std::size_t>(s) + 1], 4, dp, mbs,
                           fp::in_flight_micro_batches(s, pp, m), {}};
      const auto pred = fp::stage_memory(f.model, shape);
      double worst = 0;
      const std::string prefix = name + "_stage" + std::to_string(s) + "_rank";
      for (const auto& c : fs::directory_iterator(*csvs)) {
        if (c.path().filename().string().rfind(prefix, 0) != 0) continue;
        std::ifstream in(c.path());
        std::string header, row;
        std::getline(in, header);
        std::size_t col = 0;
        {
          std::stringstream hs(header);
          std::size_t i = 0;
          for (std::string cell; std::getline(hs, cell, ','); ++i) {
            if (cell == "max_allocated") col = i;
          }
        }
        ASSERT_GT(col, 0u) << c.path() << " has no max_allocated column";
        while (std::getline(in, row)) {
          std::vector<std::string> cols;
          std::stringstream rs(row);
          for (std::string cell; std::getline(rs, cell, ',');) cols.push_back(cell);
          if (cols.size() > col) worst = std::max(worst, std::stod(cols[col]) * 1048576.0);  // MB
        }
      }
      if (worst <= 0) continue;
      const double err = (static_cast<double>(pred.peak_bytes) - worst) / worst;
      mem.add(err);
      std::printf("%-26s stage %d: predicted %6.2f GB, max_allocated %6.2f GB, %+6.1f%%\n", name.c_str(), s,
                  pred.peak_bytes / 1e9, worst / 1e9, 100 * err);
    }
  }
  ASSERT_GT(mem.n, 0);
  std::printf("megatron-runs memory (max_allocated, no runtime overhead): mean |err| %.1f%%, max |err| %.1f%%, worst %.1f%%\n",
              100 * mem.mean(), 100 * mem.max_abs, 100 * mem.min_signed);
  // Not a target (see docs/planner.md): these runs hold ~1.9x Korthikanti's activations.
  // Assert only what we measured, so a regression still fails.
  EXPECT_LE(mem.mean(), MEGATRON_MEAN_BOUND);
}
