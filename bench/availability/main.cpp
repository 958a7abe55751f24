// The availability replay on Sailor's three A100 traces: flextrain (Poisson benefit check) vs
// greedy vs static, for two profiled models on A100-40 and several restart costs. Ratios are
// against greedy and static replayed in the same run on the same trace and table.
//
// Usage: bench_availability [--restarts 30,60,120] [--p-th 0.6]
// Prints per trace x model x restart: samples and samples per GPU-hour of flextrain over greedy
// and over static, restarts, benefit checks refused, for λ windows of 1 h and 8 h (FlexTrain's).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/data_path.h"
#include "simulator/availability_replay.h"
#include "simulator/availability_table.h"
#include "simulator/sailor_job_loader.h"
#include "simulator/trace_loader.h"

using namespace flotilla;
using namespace flotilla::simulator;

int main(int argc, char** argv) {
  std::vector<double> restarts = {30, 60, 120};
  double p_th = 0.6;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--restarts") {
      restarts.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) restarts.push_back(std::atof(x.c_str()));
    } else if (a == "--p-th") {
      p_th = std::atof(v.c_str());
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  for (const char* rel : {"sailor/availability", "sailor/profiles", "sailor/network"})
    if (!data_path(rel)) {
      std::printf("SKIP: %s\n", data_missing_message(rel).c_str());
      return 0;
    }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = data_path("sailor/availability")->string();
  const std::vector<std::string> traces = {"a100_trace.json", "a100_trace_16.json",
                                           "a100_trace_original.json"};
  const int gbs = 2048;
  std::printf("bench_availability: one job on A100-40, global batch %d, P_th %.2f; ratios are "
              "flextrain over greedy (F/G) and over static (F/S) in the same run\n", gbs, p_th);
  // Geometric means over the traces, per (model, restart, window).
  std::map<std::string, std::vector<double>> logs;
  int replays = 0;
  for (const char* model : {"OPT-350", "GPT-Neo-2.7"}) {
    const auto loaded = load_sailor_planner_job(model, "A100-40", gbs,
                                                data_path("sailor/profiles")->string(),
                                                data_path("sailor/network")->string());
    if (!loaded.error.empty()) {
      std::printf("%s: %s\n", model, loaded.error.c_str());
      return 1;
    }
    const auto at = build_availability_table(loaded.job, 16);
    if (!at.table) {
      std::printf("%s: %s\n", model, at.error.c_str());
      return 1;
    }
    std::printf("\n## %s (%s): samples/s per GPU count:", model,
                loaded.profiled ? "Sailor profile" : "FLOP estimate");
    for (const auto& e : at.table->entries)
      std::printf(" %d:%.1f", e.gpus, entry_samples_per_s(e, gbs));
    std::printf("\n%-26s %7s %6s | %8s %8s %8s %8s %5s %5s %5s %7s\n", "trace", "restart", "window",
                "F/G smp", "F/G s/GH", "F/S smp", "F/S s/GH", "rs S", "rs G", "rs F", "refused");
    for (const auto& name : traces) {
      const auto trace = load_availability_trace(dir + "/" + name);
      if (!trace.error.empty()) {
        std::printf("%s\n", trace.error.c_str());
        return 1;
      }
      for (double restart : restarts) {
        for (double window_h : {1.0, 8.0}) {
          AvailabilityReplayParams p;
          p.restart_s = restart;
          p.benefit.threshold_probability = p_th;
          p.window_s = window_h * 3600;
          p.global_batch = gbs;
          p.checkpoint_bytes = at.model.checkpoint_bytes;
          p.overhead.gpus_per_node = 4;
          AvailabilityResult r[3];
          for (auto pol : {AvailabilityPolicy::static_start, AvailabilityPolicy::greedy,
                           AvailabilityPolicy::flextrain}) {
            p.policy = pol;
            r[static_cast<int>(pol)] = replay_availability(trace.points, *at.table, p);
            ++replays;
            if (!r[static_cast<int>(pol)].violations.empty()) {
              std::printf("INVARIANT VIOLATION %s: %s\n", name.c_str(),
                          r[static_cast<int>(pol)].violations.front().c_str());
              return 1;
            }
          }
          const auto& s = r[0];
          const auto& g = r[1];
          const auto& f = r[2];
          const double fg = f.samples / g.samples, fgh = f.samples_per_gpu_hour / g.samples_per_gpu_hour;
          const double fs = f.samples / s.samples, fsh = f.samples_per_gpu_hour / s.samples_per_gpu_hour;
          std::printf("%-26s %6.0fs %5.0fh | %8.4f %8.4f %8.4f %8.4f %5d %5d %5d %7d\n", name.c_str(),
                      restart, window_h, fg, fgh, fs, fsh, s.restarts, g.restarts, f.restarts,
                      f.benefit_checks_refused);
          char key[128];
          std::snprintf(key, sizeof key, "%-12s %6.0fs %5.0fh", model, restart, window_h);
          auto& v = logs[key];
          if (v.empty()) v.assign(4, 0.0);
          v[0] += std::log(fg);
          v[1] += std::log(fgh);
          v[2] += std::log(fs);
          v[3] += std::log(fsh);
        }
      }
    }
  }
  std::printf("\n## geometric mean over the %zu traces\n%-27s | %8s %8s %8s %8s\n", traces.size(),
              "model restart window", "F/G smp", "F/G s/GH", "F/S smp", "F/S s/GH");
  for (const auto& [key, v] : logs)
    std::printf("%-27s | %8.4f %8.4f %8.4f %8.4f\n", key.c_str(), std::exp(v[0] / traces.size()),
                std::exp(v[1] / traces.size()), std::exp(v[2] / traces.size()),
                std::exp(v[3] / traces.size()));
  std::printf("\n%d replays in %.3f s wall\n", replays,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
