// FlexTrain Fig. 11 on the ElasticFlow traces: elastic-job JCT and non-elastic queue time of the
// four policies at elastic fractions 10/20/40/60 %, normalised to `static` measured in the same
// run on the same trace, cluster and elastic set. Also prints the wall time per simulation.
//
// Usage: bench_elastic_jct [--consistency strict|relaxed] [--min-gpus N] [--load L]
//                          [--clusters 01,02,...] [--plot out.png]
// Without --load it runs cluster loads 0.5, 0.6 and 0.7 (auto_cluster sizing, docs/simulator.md).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "common/data_path.h"
#include "simulator/sim_sweep.h"
#include "simulator/trace_loader.h"

using namespace flotilla;
using namespace flotilla::scaler;
using namespace flotilla::simulator;

int main(int argc, char** argv) {
  SimOptions base;
  std::vector<double> loads = {0.5, 0.6, 0.7};
  std::string clusters = "01,02,03,04";
  std::string plot;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--consistency") base.table.consistency = v == "relaxed" ? Consistency::relaxed : Consistency::strict;
    else if (a == "--min-gpus") base.min_gpus = std::atoi(v.c_str());
    else if (a == "--load") loads = {std::atof(v.c_str())};
    else if (a == "--clusters") clusters = v;
    else if (a == "--plot") plot = v;
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  const auto dir = data_path("traces/elasticflow");
  if (!dir) {
    std::printf("SKIP: %s\n", data_missing_message("traces/elasticflow").c_str());
    return 0;
  }
  const auto bench_t0 = std::chrono::steady_clock::now();
  double largest_trace_wall_s = 0;
  size_t largest_trace_jobs = 0;
  for (double load : loads) {
  std::printf("\n######## bench_elastic_jct: consistency=%s min_gpus=%d cluster load target=%.2f\n",
              base.table.consistency == Consistency::strict ? "strict (PP-only)" : "relaxed (DP+PP)",
              base.min_gpus, load);
  std::vector<SweepResult> all;
  for (size_t pos = 0; pos < clusters.size();) {
    const size_t comma = clusters.find(',', pos);
    const std::string id = clusters.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? clusters.size() : comma + 1;
    const std::string path = (*dir / ("cluster" + id + ".csv")).string();
    const auto trace = load_trace(path);
    if (!trace.error.empty()) {
      std::printf("cluster%s: %s\n", id.c_str(), trace.error.c_str());
      continue;
    }
    const auto nodes = auto_cluster(trace.jobs, load);
    const auto t0 = std::chrono::steady_clock::now();
    auto sweep = run_fig11_sweep(trace.jobs, nodes, base, {0.1, 0.2, 0.4, 0.6});
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (trace.jobs.size() > largest_trace_jobs) {
      largest_trace_jobs = trace.jobs.size();
      largest_trace_wall_s = wall / std::max(1, sweep.simulations);
    }
    sweep.label = "cluster" + id;
    std::printf("\n== cluster%s: %zu jobs, %zu nodes x 8 GPUs, %d simulations in %.2f s (%.3f s each)\n",
                id.c_str(), trace.jobs.size(), nodes.size(), sweep.simulations, wall,
                wall / std::max(1, sweep.simulations));
    print_sweep(sweep, stdout);
    all.push_back(std::move(sweep));
  }
  print_sweep_summary(all, stdout);
  if (!plot.empty() && !all.empty()) {
    const std::string png = loads.size() == 1 ? plot : plot + ".load" + std::to_string(load).substr(0, 4) + ".png";
    const auto err = plot_sweep(all.back(), png);
    std::printf("%s\n", err.empty() ? ("plot written to " + png).c_str() : err.c_str());
  }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_t0).count();
  std::printf("\nlargest trace (%zu jobs): %.3f s per simulation; whole bench %.1f s\n",
              largest_trace_jobs, largest_trace_wall_s, total);
  return 0;
}
