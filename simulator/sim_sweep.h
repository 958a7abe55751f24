// FlexTrain Fig. 11 sweep: every policy at several elastic fractions, normalised to `static` on
// the same trace, cluster and elastic set; plus printing and a gnuplot figure (shell I/O: the
// printing and plotting functions write to files and run gnuplot; run_fig11_sweep is pure).
//
// Guarantees: normalised JCT = mean elastic JCT(policy) / mean elastic JCT(static) at the same
//   fraction and seed (the same jobs are elastic in both); normalised queue time likewise for the
//   non-elastic jobs (1.0 when both are zero).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "simulator/simulator.h"

namespace flotilla::simulator {

struct SweepPoint {
  double elastic_fraction = 0;
  Policy policy = Policy::static_fcfs;
  SimMetrics metrics;
  double normalized_elastic_jct = 1;
  double normalized_nonelastic_queue = 1;
  int invariant_violations = 0;
};

struct SweepResult {
  std::string label;
  std::vector<SweepPoint> points;  // fraction-major, static first
  int simulations = 0;
};

SweepResult run_fig11_sweep(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes,
                            const SimOptions& base, const std::vector<double>& fractions);

void print_sweep(const SweepResult& sweep, std::FILE* out);
// Geometric means of the normalised numbers over several sweeps, per policy and fraction.
void print_sweep_summary(const std::vector<SweepResult>& sweeps, std::FILE* out);
// Why a figure cannot be written to png_path (its directory is missing, or it holds a ' that
// would break gnuplot's quoting), or "" if it looks writable. plot_sweep checks it too; callers
// check it before running the sweep.
std::string plot_path_error(const std::string& png_path);
// Two-panel PNG like FlexTrain Fig. 11 via gnuplot (its messages go to stderr); returns an error
// line or "".
std::string plot_sweep(const SweepResult& sweep, const std::string& png_path);

}  // namespace flotilla::simulator
