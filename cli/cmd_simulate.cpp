// `flotilla simulate`: replay a job trace on a cluster under a scaling policy (the trace
// simulator shell around flotilla::scaler). See docs/simulator.md.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/simulate_flags.h"
#include "simulator/sim_sweep.h"
#include "simulator/simulator.h"
#include "simulator/trace_loader.h"

// The JSON of --json names every metric by its field, so the key list cannot drift from
// the struct (found by ADL, hence in the struct's namespace).
namespace flotilla::simulator {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SimMetrics, jobs, elastic_jobs, skipped_jobs, unfinished_jobs, elastic_jct_mean_s,
                                   elastic_jct_p50_s, elastic_jct_p99_s, nonelastic_queue_mean_s,
                                   nonelastic_queue_p50_s, nonelastic_queue_p99_s, gpu_utilization, scaling_events,
                                   scale_ups, preemption_shrinks, preemptions_aborted, node_loss_shrinks, requeues,
                                   benefit_checks_passed, benefit_checks_refused, ends_before_restart_repays,
                                   overhead_gpu_hours, makespan_s)
}  // namespace flotilla::simulator

namespace {

using namespace flotilla::scaler;
using namespace flotilla::simulator;

const char* kUsage =
    "usage: flotilla simulate availability --trace FILE --model NAME --gpu TYPE ... (see\n"
    "         `flotilla simulate availability --help`: one job on a GPU pool that follows an\n"
    "         availability trace)\n"
    "       flotilla simulate --trace FILE [--cluster FILE|auto[:LOAD]]\n"
    "         [--policy static|greedy|elasticflow|flextrain] [--elastic-fraction F] [--seed N]\n"
    "         [--consistency strict|relaxed] [--min-gpus N] [--p-th P] [--window-h H]\n"
    "         [--cap-factor K] [--lose-node T:INDEX]... [--join-node T:INDEX]... [--json]\n"
    "         [--models auto|table2|planner] [--plot out.png]\n"
    "  --trace     ElasticFlow CSV (job_id,submission_time,duration,num_gpu) or Alibaba GPU v2023\n"
    "              pod list\n"
    "  --cluster   YAML `nodes: [{count, gpus, gpu_type, zone}]`, the Alibaba node list CSV, or\n"
    "              auto[:LOAD] (8-GPU nodes: mean demand / LOAD, default 0.6, LOAD >= 0.01, and\n"
    "              >= 2x the largest job)\n"
    "  --models    elastic jobs' models: table2 (FlexTrain Table 2, type-agnostic tables) or\n"
    "              planner (dense presets, one scale table per GPU type from the planner's time and\n"
    "              memory model); auto = planner on a cluster with several GPU types\n"
    "  --plot      also runs all four policies at 10/20/40/60 % elastic and writes a figure like\n"
    "              FlexTrain Fig. 11 (needs gnuplot)\n";

using flotilla::cli::parse_number;
using flotilla::cli::parse_whole;

bool parse_node_event(const std::string& s, bool join, NodeEvent& e) {
  const auto colon = s.find(':');
  double t = 0, idx = 0;
  if (colon == std::string::npos || !parse_number(s.substr(0, colon), t) || t < 0 ||
      !parse_whole(s.substr(colon + 1), 0, INT_MAX, idx))
    return false;
  e = {t, static_cast<int>(idx), join};
  return true;
}

int run(const std::vector<std::string>& args) {
  std::string trace_path, cluster_spec = "auto", plot_path;
  bool json = false;
  if (!args.empty() && args.front() == "availability")
    return flotilla::cli::run_simulate_availability({args.begin() + 1, args.end()});
  SimOptions opt;
  auto bad = [](const std::string& msg) { return flotilla::cli::usage_error("flotilla simulate", msg); };
  static const std::vector<std::string> kFlagsWithValue = {
      "--trace",    "--cluster", "--plot",     "--policy",     "--elastic-fraction", "--seed",      "--consistency",
      "--min-gpus", "--p-th",    "--window-h", "--cap-factor", "--models",           "--lose-node", "--join-node"};
  // Flags whose value is a name or a path, taken as written.
  const std::map<std::string, std::string*> text_flags = {
      {"--trace", &trace_path}, {"--cluster", &cluster_spec}, {"--plot", &plot_path}};
  // Each flag's value: "" once taken, else the line to print.
  auto take = [&](const std::string& a, const std::string& v) -> std::string {
    if (auto path = text_flags.find(a); path != text_flags.end()) {
      *path->second = v;
      return "";
    }
    double x = 0;
    if (a == "--policy") {
      const auto p = parse_policy(v);
      if (!p) return "unknown policy '" + v + "': use static, greedy, elasticflow or flextrain";
      opt.policy = *p;
    } else if (a == "--elastic-fraction") {
      if (!parse_number(v, x) || x < 0 || x > 1)
        return "--elastic-fraction must be a number in [0, 1], got '" + v + "'";
      opt.elastic_fraction = x;
    } else if (a == "--seed") {
      if (!parse_whole(v, 0, 9007199254740992.0, x))  // 2^53: every integer up to it is exact
        return "--seed must be a whole number in [0, 2^53], got '" + v + "'";
      opt.seed = static_cast<std::uint64_t>(x);
    } else if (a == "--consistency") {
      bool strict = true;
      if (const auto e = flotilla::cli::parse_consistency(v, strict); !e.empty()) return e;
      opt.table.consistency = strict ? Consistency::strict : Consistency::relaxed;
    } else if (a == "--min-gpus") {
      if (!parse_whole(v, 1, INT_MAX, x)) return "--min-gpus must be a whole number >= 1, got '" + v + "'";
      opt.min_gpus = static_cast<int>(x);
    } else if (a == "--p-th") {
      if (const auto e = flotilla::cli::parse_p_th(v, x); !e.empty()) return e;
      opt.benefit.threshold_probability = x;
    } else if (a == "--window-h") {
      if (const auto e = flotilla::cli::parse_window_h(v, opt.window_s); !e.empty()) return e;
    } else if (a == "--cap-factor") {
      if (!parse_number(v, x) || x < 1) return "--cap-factor must be >= 1";
      opt.table.cap_factor = x;
    } else if (a == "--models") {
      const auto m = parse_job_model_source(v);
      if (!m) return "--models is auto, table2 or planner, got '" + v + "'";
      opt.job_models = *m;
    } else if (a == "--lose-node" || a == "--join-node") {
      NodeEvent e;
      if (!parse_node_event(v, a == "--join-node", e))
        return a + " takes TIME_S:NODE_INDEX (time >= 0, index a whole number >= 0), got '" + v + "'";
      opt.node_events.push_back(e);
    }
    return "";
  };
  if (const auto stop =
          flotilla::cli::walk_simulate_flags(args, "flotilla simulate", kUsage, kFlagsWithValue, json, take))
    return *stop;
  if (trace_path.empty()) return bad("--trace FILE is required (see --help)");
  // Checked now, not after the sweep's 16 simulations have run.
  if (!plot_path.empty())
    if (const auto err = plot_path_error(plot_path); !err.empty()) return bad("--plot: " + err);
  const auto trace = load_trace(trace_path);
  if (!trace.error.empty()) return bad(trace.error), 1;
  if (trace.jobs.empty()) return bad("trace " + trace_path + " has no GPU jobs"), 1;
  std::vector<SimNode> nodes;
  // Only `auto` and `auto:LOAD`: a cluster file named e.g. auto.yaml is a file.
  if (cluster_spec == "auto" || cluster_spec.rfind("auto:", 0) == 0) {
    double load = 0.6;
    if (cluster_spec.size() > 4 && (!parse_number(cluster_spec.substr(5), load) || load < 0.01))
      return bad("--cluster auto:LOAD needs a number LOAD >= 0.01, got '" + cluster_spec + "'");
    nodes = auto_cluster(trace.jobs, load);
  } else {
    auto c = load_cluster(cluster_spec);
    if (!c.error.empty()) return bad(c.error), 1;
    nodes = std::move(c.nodes);
  }
  for (const auto& e : opt.node_events)
    if (e.node >= static_cast<int>(nodes.size()))
      return bad("node index " + std::to_string(e.node) + " out of range: the cluster has " +
                 std::to_string(nodes.size()) + " nodes");

  const auto t0 = std::chrono::steady_clock::now();
  const auto r = simulate(trace.jobs, nodes, opt);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int gpus = 0;
  std::map<std::string, std::pair<int, int>> by_type;  // type -> (GPUs, jobs that ran on it)
  for (const auto& n : nodes) {
    gpus += n.gpus;
    by_type[n.gpu_type].first += n.gpus;
  }
  for (const auto& j : r.jobs) by_type[j.gpu_type].second += 1;
  nlohmann::json types_json = nlohmann::json::object();
  for (const auto& [type, v] : by_type) types_json[type] = {{"gpus", v.first}, {"jobs", v.second}};

  if (json) {
    nlohmann::json j = {{"trace", trace_path},
                        {"policy", policy_name(opt.policy)},
                        {"elastic_fraction", opt.elastic_fraction},
                        {"seed", opt.seed},
                        {"consistency", opt.table.consistency == Consistency::strict ? "strict" : "relaxed"},
                        {"cluster_nodes", nodes.size()},
                        {"cluster_gpus", gpus},
                        {"gpu_types", types_json},
                        {"simulation_wall_s", wall_s},
                        {"metrics", r.metrics},
                        {"sample_decisions", r.sample_decisions},
                        {"invariant_violations", r.invariant_violations}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    const auto& m = r.metrics;
    std::printf("trace %s: %d jobs (%d skipped: larger than every GPU type they may use), cluster %zu nodes / %d GPUs\n",
                trace_path.c_str(), m.jobs, m.skipped_jobs, nodes.size(), gpus);
    if (by_type.size() > 1) {
      std::printf("  GPU types (GPUs / jobs run):");
      for (const auto& [type, v] : by_type) std::printf(" %s %d/%d", type.c_str(), v.first, v.second);
      std::printf("\n");
    }
    std::printf("policy %s, elastic fraction %.2f (of jobs >= %d GPUs), seed %llu, %s consistency\n",
                policy_name(opt.policy), opt.elastic_fraction, opt.min_gpus,
                static_cast<unsigned long long>(opt.seed),
                opt.table.consistency == Consistency::strict ? "strict (PP-only)" : "relaxed (DP+PP)");
    std::printf("  elastic jobs            %d\n", m.elastic_jobs);
    std::printf("  elastic JCT             mean %.0f s  p50 %.0f s  p99 %.0f s\n", m.elastic_jct_mean_s,
                m.elastic_jct_p50_s, m.elastic_jct_p99_s);
    std::printf("  non-elastic queue time  mean %.0f s  p50 %.0f s  p99 %.0f s\n",
                m.nonelastic_queue_mean_s, m.nonelastic_queue_p50_s, m.nonelastic_queue_p99_s);
    std::printf("  GPU utilization         %.3f\n", m.gpu_utilization);
    std::printf("  scaling events          %d (%d up, %d preemption shrinks, %d node-loss shrinks; "
                "%d preemptions aborted, %d requeues)\n",
                m.scaling_events, m.scale_ups, m.preemption_shrinks, m.node_loss_shrinks,
                m.preemptions_aborted, m.requeues);
    if (opt.policy == Policy::flextrain)
      std::printf(
          "  benefit checks          %d passed (%d of them kept: the job ended before the restart "
          "repaid), %d refused\n",
          m.benefit_checks_passed, m.ends_before_restart_repays, m.benefit_checks_refused);
    std::printf("  GPU-hours lost to overhead %.1f\n", m.overhead_gpu_hours);
    std::printf("  simulated in %.3f s\n", wall_s);
    for (const auto& v : r.invariant_violations) std::printf("  INVARIANT VIOLATION: %s\n", v.c_str());
  }
  if (!plot_path.empty()) {
    auto sweep = run_fig11_sweep(trace.jobs, nodes, opt, {0.1, 0.2, 0.4, 0.6});
    sweep.label = trace_path.substr(trace_path.find_last_of('/') + 1);
    if (!json) print_sweep(sweep, stdout);
    const auto err = plot_sweep(sweep, plot_path);
    if (!err.empty()) return bad(err), 1;
    if (!json) std::printf("figure written to %s\n", plot_path.c_str());
  }
  return r.invariant_violations.empty() ? 0 : 1;
}

const flotilla::cli::CommandRegistrar simulate_command{
    {"simulate", "replay a job trace on a cluster under a scaling policy", run}};

}  // namespace
