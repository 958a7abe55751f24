#include "simulator/sim_sweep.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace flotilla::simulator {

namespace {
double ratio(double a, double b) {
  if (b <= 0) return a <= 0 ? 1.0 : INFINITY;
  return a / b;
}
constexpr Policy kPolicies[] = {Policy::static_fcfs, Policy::greedy, Policy::elasticflow,
                                Policy::flextrain};
}  // namespace

SweepResult run_fig11_sweep(const std::vector<TraceJob>& trace, const std::vector<SimNode>& nodes,
                            const SimOptions& base, const std::vector<double>& fractions) {
  SweepResult out;
  for (double f : fractions) {
    SimMetrics baseline;
    for (Policy p : kPolicies) {
      SimOptions o = base;
      o.policy = p;
      o.elastic_fraction = f;
      const auto r = simulate(trace, nodes, o);
      ++out.simulations;
      if (p == Policy::static_fcfs) baseline = r.metrics;
      SweepPoint pt;
      pt.elastic_fraction = f;
      pt.policy = p;
      pt.metrics = r.metrics;
      pt.normalized_elastic_jct = ratio(r.metrics.elastic_jct_mean_s, baseline.elastic_jct_mean_s);
      pt.normalized_nonelastic_queue =
          ratio(r.metrics.nonelastic_queue_mean_s, baseline.nonelastic_queue_mean_s);
      pt.invariant_violations = static_cast<int>(r.invariant_violations.size());
      out.points.push_back(pt);
    }
  }
  return out;
}

void print_sweep(const SweepResult& sweep, std::FILE* out) {
  std::fprintf(out, "%-6s %-12s %8s %10s %10s %9s %9s %8s %8s %6s\n", "elast%", "policy",
               "elastic", "JCT_norm", "speedup", "queue_s", "Q_norm", "scales", "ovh_GPUh", "util");
  for (const auto& p : sweep.points) {
    std::fprintf(out, "%-6.0f %-12s %8d %10.3f %10.3f %9.0f %9.4f %8d %8.1f %6.3f%s\n",
                 p.elastic_fraction * 100, policy_name(p.policy), p.metrics.elastic_jobs,
                 p.normalized_elastic_jct, 1.0 / p.normalized_elastic_jct,
                 p.metrics.nonelastic_queue_mean_s, p.normalized_nonelastic_queue,
                 p.metrics.scaling_events, p.metrics.overhead_gpu_hours, p.metrics.gpu_utilization,
                 p.invariant_violations ? "  INVARIANT VIOLATIONS" : "");
  }
}

void print_sweep_summary(const std::vector<SweepResult>& sweeps, std::FILE* out) {
  if (sweeps.empty()) return;
  struct Acc { double log_jct = 0, log_q = 0; int n = 0; };
  std::map<std::pair<double, int>, Acc> acc;
  for (const auto& s : sweeps)
    for (const auto& p : s.points) {
      if (p.metrics.elastic_jobs == 0 || !std::isfinite(p.normalized_nonelastic_queue)) continue;
      auto& a = acc[{p.elastic_fraction, static_cast<int>(p.policy)}];
      a.log_jct += std::log(p.normalized_elastic_jct);
      a.log_q += std::log(std::max(1e-9, p.normalized_nonelastic_queue));
      ++a.n;
    }
  std::fprintf(out, "\n== geometric mean over %zu clusters (normalised to static)\n", sweeps.size());
  std::fprintf(out, "%-6s %-12s %10s %10s %9s\n", "elast%", "policy", "JCT_norm", "speedup", "Q_norm");
  for (const auto& [key, a] : acc) {
    const double jct = std::exp(a.log_jct / a.n), q = std::exp(a.log_q / a.n);
    std::fprintf(out, "%-6.0f %-12s %10.3f %10.3f %9.4f\n", key.first * 100,
                 policy_name(static_cast<Policy>(key.second)), jct, 1.0 / jct, q);
  }
}

std::string plot_path_error(const std::string& png_path) {
  // The path is quoted with ' for gnuplot and the shell; a ' inside it would end the quote.
  if (png_path.find('\'') != std::string::npos)
    return "plot path " + png_path + " contains a single quote; give a path without one";
  std::error_code ec;
  const auto dir = std::filesystem::path(png_path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    return "plot path " + png_path + ": directory " + dir.string() +
           " does not exist; create it or give another path";
  return "";
}

std::string plot_sweep(const SweepResult& sweep, const std::string& png_path) {
  namespace fs = std::filesystem;
  if (auto err = plot_path_error(png_path); !err.empty()) return err;
  const fs::path dat = fs::path(png_path).replace_extension(".dat");
  const fs::path gp = fs::path(png_path).replace_extension(".gp");
  {
    std::ofstream d(dat);
    if (!d) return "cannot write " + dat.string() + ": check that its directory is writable";
    d << "# fraction static_jct greedy_jct elasticflow_jct flextrain_jct static_q greedy_q "
         "elasticflow_q flextrain_q\n";
    std::map<double, std::map<int, const SweepPoint*>> rows;
    for (const auto& p : sweep.points) rows[p.elastic_fraction][static_cast<int>(p.policy)] = &p;
    for (const auto& [f, byp] : rows) {
      d << f * 100;
      for (int k = 0; k < 4; ++k) d << ' ' << (byp.count(k) ? byp.at(k)->normalized_elastic_jct : 1);
      for (int k = 0; k < 4; ++k)
        d << ' ' << (byp.count(k) ? byp.at(k)->normalized_nonelastic_queue : 1);
      d << '\n';
    }
  }
  {
    std::ofstream g(gp);
    if (!g) return "cannot write " + gp.string() + ": check that its directory is writable";
    g << "set terminal pngcairo size 1100,420 noenhanced\n"
      << "set output '" << png_path << "'\n"
      << "set multiplot layout 1,2 title '" << sweep.label << " (normalised to static)'\n"
      << "set style data histograms\nset style histogram clustered gap 1\n"
      << "set style fill solid 0.8 border -1\nset yrange [0:1.4]\nset key top center horizontal\n"
      << "set grid ytics\n"
      << "set xlabel 'elastic job %'\n"
      << "set title '(a) JCT of elastic jobs'\n"
      << "plot '" << dat.string() << "' using 3:xtic(1) title 'greedy (no Poisson)', '' using 4 "
         "title 'ElasticFlow', '' using 5 title 'FlexTrain'\n"
      << "set title '(b) queue time of non-elastic jobs'\n"
      << "plot '" << dat.string() << "' using 7:xtic(1) title 'greedy (no Poisson)', '' using 8 "
         "title 'ElasticFlow', '' using 9 title 'FlexTrain'\n"
      << "unset multiplot\n";
  }
  // gnuplot's chatter goes to stderr: stdout may carry --json.
  const std::string cmd = "gnuplot '" + gp.string() + "' 1>&2";
  if (std::system(cmd.c_str()) != 0)
    return "gnuplot failed (is gnuplot installed? Debian: gnuplot-nox); data left in " + dat.string();
  return "";
}

}  // namespace flotilla::simulator
