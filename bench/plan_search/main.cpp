// Plan search time and plan throughput on Sailor's planner scenarios (sailor.txt §5.2-5.3).
//
// For each scenario it times search_plans() (stage DP + H1-H6 + branch and bound) and, as
// baselines measured in the same run, the same search without the bound (Sailor's recipe) and
// the plain DP (no heuristics, no bound, every D). It prints the times, their ratios, and the
// ratio of the plans' throughputs (what the pruning gives up). Sailor's published times are
// printed for context only.
// Single-threaded: the search is. Uses Sailor's measured profiles and network fits from
// $FLOTILLA_DATA when present, else the FLOP estimate (said in the output).
// Flags: --only N (one scenario), --quick, --skip-baseline, --deep, --cluster-scale (issue 13
// item 4's 14,336 GPUs; with --model NAME one model, with --search-only just the default search
// in this process, for perf and for a whole-process A/B timing (e.g. /usr/bin/time -v) against another binary).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/data_path.h"
#include "process/fork_call.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"
#include "planner/search.h"
#include "planner/search_space.h"

namespace fp = flotilla::planner;

namespace {

struct Scenario {
  const char* name;
  const char* model;
  std::vector<std::pair<const char*, int>> gpus;
  double sailor_seconds;  // published search time, 0 = not published
  double goal_seconds;    // this goal, 0 = none
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Timed {
  double seconds = 0;
  fp::SearchResult result;
};

Timed timed_search(const fp::SearchRequest& request, const fp::EvalContext& context, int repeats) {
  Timed best;
  best.seconds = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fp::SearchResult result = fp::search_plans(request, context);
    const double s = seconds_since(start);
    if (s < best.seconds) {
      best.seconds = s;
      best.result = std::move(result);
    }
  }
  return best;
}

// How the search's throughput compares with a baseline's; 0 when the baseline found no plan.
double throughput_ratio(double search_tokens_per_s, double baseline_tokens_per_s) {
  return baseline_tokens_per_s > 0 ? search_tokens_per_s / baseline_tokens_per_s : 0.0;
}

double tokens(const fp::SearchResult& r) {
  return r.plans.empty() ? 0.0 : r.plans.front().evaluation.tokens_per_second;
}

// Today's search before issue 13, one GPU type per stage (no mixed-type stages), timed and
// printed under the scenario's name as the first line, the baseline the search is read against.
Timed timed_one_type_search(const char* scenario, const fp::SearchRequest& request, const fp::EvalContext& context,
                            int repeats) {
  fp::SearchRequest one_type_request = request;
  one_type_request.options.mix_types_within_stage = false;
  Timed one_type = timed_search(one_type_request, context, repeats);
  std::printf("%s\n", scenario);
  std::printf("  one type %8.3f s  %10.0f tokens/s  (one GPU type per stage, as before issue 13)\n", one_type.seconds,
              tokens(one_type.result));
  return one_type;
}

// Sailor's global batch (2048 sequences), one zone, the best plan only.
fp::SearchRequest bench_request(fp::ModelSpec model, const std::vector<std::pair<const char*, int>>& gpus,
                                const fp::GpuCatalog& catalog) {
  fp::SearchRequest request;
  request.model = std::move(model);
  request.global_batch_size = 2048;
  for (const auto& [gpu, count] : gpus) {
    const fp::GpuType* type = catalog.find(gpu);
    request.pools.push_back({type->name, "zone-a", "zone-a", count, type->gpus_per_node});
  }
  request.options.max_plans = 1;
  return request;
}

// A GPT of `layers` layers, 1024 wide (the CLI test's deep spec); no profile matches it, so its
// times come from the FLOP estimate.
fp::ModelSpec deep_model(int layers) {
  fp::ModelSpec m;
  m.name = "deep-" + std::to_string(layers);
  m.num_layers = layers;
  m.hidden = 1024;
  m.heads = 16;
  m.head_dim = 64;
  m.ffn_hidden = 4096;
  m.vocab = 50272;
  m.seq_len = 2048;
  m.max_position_embeddings = 2048;
  return m;
}

constexpr rlim_t kChildMemoryBytes = rlim_t{3} << 30;

struct Bounded {
  bool finished = false;
  double seconds = 0;
  double tokens_per_second = 0;
  double peak_rss_mb = 0;  // the child's peak resident set (includes what it inherited at fork)
  double cpu_seconds = 0;  // the child's user + system CPU time (steadier than wall time on a shared machine)
};

// The search in a child process, stopped after `limit_seconds` (the old path can take many
// minutes on deep models; the pure search has no clock to stop it from inside).
Bounded search_with_limit(const fp::SearchRequest& request, const fp::EvalContext& context,
                          double limit_seconds) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  // The exact DP over a 1000-layer model holds up to 400 k states x 1001 cells; cap the
  // child's memory so a stopped run cannot take the machine's. (This bench is single-threaded,
  // which fork_call needs: the child runs the search without exec.)
  flotilla::process::ForkCallOptions options;
  options.rlimits.emplace_back(RLIMIT_AS, kChildMemoryBytes);
  flotilla::process::Child child = flotilla::process::fork_call(
      [&] {
        close(fds[0]);
        const auto start = std::chrono::steady_clock::now();
        const fp::SearchResult result = fp::search_plans(request, context);
        struct rusage usage {};
        getrusage(RUSAGE_SELF, &usage);
        const auto cpu = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
        const double out[4] = {seconds_since(start), tokens(result), usage.ru_maxrss / 1024.0,
                               cpu(usage.ru_utime) + cpu(usage.ru_stime)};
        (void)!write(fds[1], out, sizeof out);
        return 0;  // std::bad_alloc (the memory cap) exits 3: reported as stopped
      },
      options);
  close(fds[1]);
  const auto start = std::chrono::steady_clock::now();
  Bounded bounded;
  for (;;) {
    if (child.poll()) {
      double in[4] = {0, 0, 0, 0};
      if (read(fds[0], in, sizeof in) == static_cast<ssize_t>(sizeof in)) {
        bounded = {true, in[0], in[1], in[2], in[3]};
      } else {
        bounded.seconds = seconds_since(start);  // ran out of memory: it had not finished
      }
      break;
    }
    if (seconds_since(start) > limit_seconds) {
      child.signal(SIGKILL);
      child.wait();
      bounded.seconds = limit_seconds;
      break;
    }
    usleep(20000);
  }
  close(fds[0]);
  return bounded;
}

// One line for a baseline search (exact DP, or the first version's) against the fast search:
// its time, its throughput, and the two ratios; a baseline stopped at its limit says so.
void print_against_baseline(const char* name, const Bounded& baseline, const Timed& fast) {
  if (!baseline.finished) {
    std::printf("  %-8s > %.1f s (stopped at the time or 3 GiB limit)  speedup > %.0fx\n", name, baseline.seconds,
                baseline.seconds / fast.seconds);
    return;
  }
  std::printf("  %-8s %8.3f s  %10.1f tokens/s  speedup %.1fx, throughput ratio %.4f\n", name, baseline.seconds,
              baseline.tokens_per_second, baseline.seconds / fast.seconds,
              throughput_ratio(tokens(fast.result), baseline.tokens_per_second));
}

struct DeepScenario {
  const char* name;
  int layers;
  std::vector<std::pair<const char*, int>> gpus;
};

// Deep models: the default search (O(blocks) DP, layers grouped past 128 positions, then
// re-split over single layers) against the exact one (no grouping) and the first version's
// path (O(blocks^2) sweep, every memory row up front, no grouping), all in this run.
bool run_deep(const fp::EvalContext& context, const fp::GpuCatalog& catalog, bool quick,
              double old_limit_seconds) {
  const std::vector<DeepScenario> scenarios = {
      {"deep-300 (1024 wide), 20 A100-40 + 24 V100-16 (examples/cluster.yaml)", 300,
       {{"A100-40", 20}, {"V100-16", 24}}},
      {"deep-1000, 20 A100-40 + 24 V100-16", 1000, {{"A100-40", 20}, {"V100-16", 24}}},
      {"deep-300, 3 types x 64 (A100-40, V100-16, GH200-96)", 300,
       {{"A100-40", 64}, {"V100-16", 64}, {"GH200-96", 64}}},
      {"deep-1000, 3 types x 64 (A100-40, V100-16, GH200-96)", 1000,
       {{"A100-40", 64}, {"V100-16", 64}, {"GH200-96", 64}}},
  };
  bool ok = true;
  std::printf("deep models (FLOP estimate; times: search = default, exact = no layer grouping, "
              "old = first version's DP, stopped after %.0f s)\n\n", old_limit_seconds);
  for (const DeepScenario& scenario : scenarios) {
    fp::SearchRequest request = bench_request(deep_model(scenario.layers), scenario.gpus, catalog);
    request.training.flash_attention = true;  // as flotilla plan's default
    const Timed fast = timed_search(request, context, quick ? 1 : 3);
    fp::SearchRequest exact_request = request;
    exact_request.options.max_stage_dp_positions = 0;
    fp::SearchRequest old_request = exact_request;
    old_request.options.quadratic_stage_dp = true;
    const Timed one_type = timed_one_type_search(scenario.name, request, context, quick ? 1 : 3);
    std::printf("  search   %8.3f s  %10.1f tokens/s  %s  (%d layers per DP position, %lld states)\n",
                fast.seconds, tokens(fast.result),
                fast.result.plans.empty() ? fast.result.failure.c_str()
                                          : fp::describe_plan(fast.result.plans.front().plan).c_str(),
                fast.result.stats.layers_per_dp_position,
                static_cast<long long>(fast.result.stats.dp_states));
    const Bounded exact = search_with_limit(exact_request, context, old_limit_seconds);
    print_against_baseline("exact", exact, fast);
    const Bounded old = search_with_limit(old_request, context, old_limit_seconds);
    print_against_baseline("old", old, fast);
    // Goal: a deep plan in seconds.
    const bool met = !fast.result.plans.empty() && fast.seconds < 10.0;
    ok = ok && met;
    std::printf("  goal < 10 s with a plan: %s\n\n", met ? "met" : "NOT met");
  }
  return ok;
}

// Issue 13 item 4: 14,336 GPUs in five pools (H100-80 2048, A100-80 3072, A100-40 4096,
// V100-32 3072, L4 2048), 8 per node, each type spread evenly over four zones in three regions
// (us-central1-a/-b, us-east1-b, us-west1-a). Global batch 2048, materialized attention. Each
// search runs in a child process (time, CPU time, tokens/s, peak RSS): the default search, and
// as same-run baselines the search before item 4 (one stage-DP pool per (type, region), the
// exact DP truncated at its state budget), stopped after `limit_seconds`, and the default
// search without the DP's relaxation pre-check (prune_by_relaxation = false, which is what the
// relaxation saves). Goal: <= 1 s, <= 150 MB.
bool run_cluster_scale(const fp::EvalContext& context, const fp::GpuCatalog& catalog, double limit_seconds,
                       bool skip_baseline, const std::string& only_model, bool search_only) {
  const std::vector<std::pair<const char*, const char*>> zones = {
      {"us-central1-a", "us-central1"}, {"us-central1-b", "us-central1"}, {"us-east1-b", "us-east1"}, {"us-west1-a", "us-west1"}};
  const std::vector<std::pair<const char*, int>> types = {
      {"H100-80", 2048}, {"A100-80", 3072}, {"A100-40", 4096}, {"V100-32", 3072}, {"L4", 2048}};
  bool met = true;
  struct rusage self {};
  getrusage(RUSAGE_SELF, &self);
  std::printf("cluster scale: 14,336 GPUs, five types x four zones (three regions), 8 per node, global batch 2048\n"
              "(each search in a child process; its RSS includes the %.0f MB the bench held at fork)\n\n",
              self.ru_maxrss / 1024.0);
  for (const char* model : {"llama-3-8b", "llama-2-70b", "gpt-3-175b"}) {
    if (!only_model.empty() && only_model != model) continue;
    fp::SearchRequest request;
    request.model = *fp::find_preset(model);
    request.global_batch_size = 2048;
    for (const auto& [gpu, count] : types)
      for (const auto& [zone, region] : zones)
        request.pools.push_back({catalog.find(gpu)->name, zone, region, count / 4, 8});
    request.options.max_plans = 1;
    if (search_only) {  // one search in this process, nothing else: for perf and whole-process timing
      struct rusage start_usage {};
      getrusage(RUSAGE_SELF, &start_usage);
      const Timed shown = timed_search(request, context, 1);
      struct rusage end_usage {};
      getrusage(RUSAGE_SELF, &end_usage);
      const auto cpu = [](const struct rusage& u) {
        return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
      };
      std::printf("%s\n  search   %8.3f s (CPU %.3f s)  %10.0f tokens/s  %.6f s/iter  %s  (%lld DP runs, %lld by beam, "
                  "%lld ruled out, %lld states; %lld solves recalled)\n\n",
                  model, shown.seconds, cpu(end_usage) - cpu(start_usage), tokens(shown.result),
                  shown.result.plans.empty() ? 0.0 : shown.result.plans.front().evaluation.iter_seconds,
                  shown.result.plans.empty() ? shown.result.failure.c_str()
                                             : fp::describe_plan(shown.result.plans.front().plan).c_str(),
                  static_cast<long long>(shown.result.stats.dp_runs),
                  static_cast<long long>(shown.result.stats.beam_dp_runs),
                  static_cast<long long>(shown.result.stats.dp_runs_ruled_out),
                  static_cast<long long>(shown.result.stats.dp_states),
                  static_cast<long long>(shown.result.stats.dp_solves_recalled));
      continue;
    }
    fp::SearchRequest before = request;
    before.options.group_pools_across_regions = false;
    before.options.beam_when_truncated = false;
    fp::SearchRequest unrelaxed = request;
    unrelaxed.options.prune_by_relaxation = false;
    const Bounded fast = search_with_limit(request, context, std::max(limit_seconds, 60.0));
    const Bounded base = skip_baseline ? Bounded{} : search_with_limit(before, context, limit_seconds);
    const Bounded every_run = search_with_limit(unrelaxed, context, std::max(limit_seconds, 60.0));
    const Timed shown = timed_search(request, context, 1);  // for the plan's description
    std::printf("%s\n", model);
    if (base.finished)
      std::printf("  before   %8.3f s  %10.0f tokens/s  peak RSS %5.0f MB  (per-region pools, exact DP truncated)\n",
                  base.seconds, base.tokens_per_second, base.peak_rss_mb);
    else
      std::printf("  before   > %.0f s (stopped)\n", base.seconds);
    std::printf("  no relax %8.3f s (CPU %.3f s)  %10.0f tokens/s  peak RSS %5.0f MB  (every (mbs, D) run solved)\n",
                every_run.seconds, every_run.cpu_seconds, every_run.tokens_per_second, every_run.peak_rss_mb);    std::printf("  search   %8.3f s (CPU %.3f s)  %10.0f tokens/s  peak RSS %5.0f MB  %s  (%lld DP runs, %lld by beam, %lld ruled out)\n",
                fast.seconds, fast.cpu_seconds, fast.tokens_per_second, fast.peak_rss_mb,
                shown.result.plans.empty() ? shown.result.failure.c_str()
                                           : fp::describe_plan(shown.result.plans.front().plan).c_str(),
                static_cast<long long>(shown.result.stats.dp_runs),
                static_cast<long long>(shown.result.stats.beam_dp_runs),
                static_cast<long long>(shown.result.stats.dp_runs_ruled_out));
    const bool goal = fast.finished && fast.seconds <= 1.0 && fast.peak_rss_mb <= 150;
    std::printf("  vs no relax: time %.2fx, CPU %.2fx, throughput ratio %.4f\n",
                every_run.seconds / std::max(1e-9, fast.seconds), every_run.cpu_seconds / std::max(1e-9, fast.cpu_seconds),
                every_run.tokens_per_second > 0 ? fast.tokens_per_second / every_run.tokens_per_second : 0.0);
    std::printf("  vs before: speedup %s, throughput ratio %s; goal <= 1 s and <= 150 MB: %s\n\n",
                base.finished ? (std::to_string(base.seconds / std::max(1e-9, fast.seconds)) + "x").c_str()
                              : ("> " + std::to_string(base.seconds / std::max(1e-9, fast.seconds)) + "x").c_str(),
                base.tokens_per_second > 0 ? std::to_string(fast.tokens_per_second / base.tokens_per_second).c_str()
                                           : "- (before: no plan)",
                goal ? "met" : "NOT met");
    met = met && goal;
  }
  return met;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  bool quick = false, skip_baseline = false, deep_only = false, cluster_scale_only = false;
  int only = 0;
  double old_limit_seconds = 60;
  std::string only_model;    // --model NAME: one cluster-scale model only
  bool search_only = false;  // --search-only: cluster scale, the default search alone, in this process
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--model") == 0 && i + 1 < argc) only_model = argv[++i];
    if (std::strcmp(argv[i], "--search-only") == 0) search_only = true;
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;                 // one repeat
    if (std::strcmp(argv[i], "--skip-baseline") == 0) skip_baseline = true;  // search only
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = std::atoi(argv[++i]);  // 1-based
    if (std::strcmp(argv[i], "--deep") == 0) deep_only = true;  // only the deep-model scenarios
    if (std::strcmp(argv[i], "--cluster-scale") == 0) cluster_scale_only = true;  // issue 13 item 4
    if (std::strcmp(argv[i], "--old-limit") == 0 && i + 1 < argc) old_limit_seconds = std::atof(argv[++i]);
  }
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  fp::ProfileSet profiles;
  bool have_profiles = false;
  if (auto dir = flotilla::data_path("sailor/profiles")) {
    if (auto loaded = fp::load_profile_dir(dir->string())) {
      profiles = std::move(loaded.value());
      have_profiles = true;
    }
  }
  fp::NetworkModel network = fp::default_network_model();
  if (auto dir = flotilla::data_path("sailor/network")) {
    if (auto loaded = fp::load_network_dir(dir->string())) network = std::move(loaded.value());
  }
  fp::ComputeModel compute(have_profiles ? &profiles : nullptr);
  fp::EvalContext context;
  context.catalog = &catalog;
  context.compute = &compute;
  context.network = &network;

  const std::vector<Scenario> scenarios = {
      {"OPT-350M, 128 A100-40", "opt-350m", {{"A100-40", 128}}, 0, 0},
      {"GPT-Neo-2.7B, 32 A100-40 + 96 V100-16", "gpt-neo-2.7b", {{"A100-40", 32}, {"V100-16", 96}}, 1.6, 0},
      {"GPT-Neo-2.7B, 80 A100-40 + 240 V100-16", "gpt-neo-2.7b", {{"A100-40", 80}, {"V100-16", 240}}, 7.67, 0},
      {"GPT-Neo-2.7B, 128 A100-40 + 384 V100-16", "gpt-neo-2.7b", {{"A100-40", 128}, {"V100-16", 384}}, 17.4, 0.2},
      {"GPT-Neo-2.7B, 3 types x 256 (A100-40, V100-16, GH200-96)", "gpt-neo-2.7b",
       {{"A100-40", 256}, {"V100-16", 256}, {"GH200-96", 256}}, 4900, 2.0},
  };
  std::printf("bench_plan_search: compute times from %s; global batch 2048 x 2048 tokens; one core\n",
              have_profiles ? "Sailor's measured profiles" : "the FLOP estimate (no $FLOTILLA_DATA)");
  std::printf("search = stage DP + H1-H6 + branch and bound; baseline = the same without the bound "
              "(Sailor's recipe)\n\n");
  bool goals_met = true;
  if (cluster_scale_only) return run_cluster_scale(context, catalog, old_limit_seconds * 2, skip_baseline, only_model, search_only) ? 0 : 1;
  for (std::size_t index = 0; index < scenarios.size(); ++index) {
    const Scenario& scenario = scenarios[index];
    if (deep_only || (only > 0 && static_cast<std::size_t>(only) != index + 1)) continue;
    const fp::SearchRequest request = bench_request(*fp::find_preset(scenario.model), scenario.gpus, catalog);
    const Timed fast = timed_search(request, context, quick ? 1 : 3);
    // Baseline 1: Sailor's recipe as the paper states it (DP + H1-H6), without our bound.
    fp::SearchRequest baseline_request = request;
    baseline_request.options.branch_and_bound = false;
    const Timed slow = skip_baseline ? Timed{} : timed_search(baseline_request, context, 1);
    // Baseline 2: no heuristics and no bound, every D (the plain DP of Sailor's Table 3; its
    // per-run state budget truncates the largest cases, which the line says). --quick skips
    // it for the three large scenarios (~2 minutes).
    fp::SearchRequest plain_request = baseline_request;
    plain_request.options.heuristics = false;
    const bool run_plain = !skip_baseline && (index < 2 || !quick);
    const Timed plain = run_plain ? timed_search(plain_request, context, 1) : Timed{};
    const Timed one_type = timed_one_type_search(scenario.name, request, context, quick ? 1 : 3);
    std::printf("  search   %8.3f s  %10.0f tokens/s  %s  (%lld DP runs, %lld states, %lld evaluations)\n",
                fast.seconds, tokens(fast.result),
                fast.result.plans.empty() ? fast.result.failure.c_str()
                                          : fp::describe_plan(fast.result.plans.front().plan).c_str(),
                static_cast<long long>(fast.result.stats.dp_runs),
                static_cast<long long>(fast.result.stats.dp_states),
                static_cast<long long>(fast.result.stats.evaluations));
    std::printf("  baseline %8.3f s  %10.0f tokens/s  (%lld DP runs, %lld states%s)\n", slow.seconds,
                tokens(slow.result), static_cast<long long>(slow.result.stats.dp_runs),
                static_cast<long long>(slow.result.stats.dp_states),
                slow.result.rejection_counts.count("truncated") ? ", some DPs truncated" : "");
    if (run_plain)
      std::printf("  plain DP %8.3f s  %10.0f tokens/s  (no H2/H3, no bound; %lld states)  speedup %.1fx, "
                  "throughput ratio %.4f%s\n",
                  plain.seconds, tokens(plain.result), static_cast<long long>(plain.result.stats.dp_states),
                  plain.seconds / fast.seconds,
                  throughput_ratio(tokens(fast.result), tokens(plain.result)),
                  plain.result.rejection_counts.count("truncated") ? " (some DPs truncated)" : "");
    std::printf("  mixed-type stages: time %.2fx of one type per stage, throughput ratio %.4f\n",
                fast.seconds / one_type.seconds,
                throughput_ratio(tokens(fast.result), tokens(one_type.result)));
    std::printf("  speedup over baseline %.1fx, throughput ratio %.4f", slow.seconds / fast.seconds,
                throughput_ratio(tokens(fast.result), tokens(slow.result)));
    if (scenario.sailor_seconds > 0) std::printf(", Sailor reported %.1f s", scenario.sailor_seconds);
    if (scenario.goal_seconds > 0) {
      const bool met = fast.seconds < scenario.goal_seconds;
      goals_met = goals_met && met;
      std::printf(", goal < %.1f s: %s", scenario.goal_seconds, met ? "met" : "NOT met");
    }
    std::printf("\n\n");
  }
  if (only == 0 && !run_deep(context, catalog, quick, old_limit_seconds)) goals_met = false;
  return goals_met ? 0 : 1;
}
