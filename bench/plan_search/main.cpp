// Plan search time and plan throughput on Sailor's planner scenarios (sailor.txt §5.2-5.3).
//
// For each scenario it times search_plans() (stage DP + H1-H6 + branch and bound) and, as
// baselines measured in the same run, the same search without the bound (Sailor's recipe) and
// the plain DP (no heuristics, no bound, every D). It prints the times, their ratios, and the
// ratio of the plans' throughputs (what the pruning gives up). Sailor's published times are
// printed for context only.
// Single-threaded: the search is. Uses Sailor's measured profiles and network fits from
// $FLOTILLA_DATA when present, else the FLOP estimate (said in the output).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/data_path.h"
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

double tokens(const fp::SearchResult& r) {
  return r.plans.empty() ? 0.0 : r.plans.front().evaluation.tokens_per_second;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  bool quick = false, skip_baseline = false;
  int only = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;                 // one repeat
    if (std::strcmp(argv[i], "--skip-baseline") == 0) skip_baseline = true;  // search only
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = std::atoi(argv[++i]);  // 1-based
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
  for (std::size_t index = 0; index < scenarios.size(); ++index) {
    const Scenario& scenario = scenarios[index];
    if (only > 0 && static_cast<std::size_t>(only) != index + 1) continue;
    fp::SearchRequest request;
    request.model = *fp::find_preset(scenario.model);
    request.global_batch_size = 2048;
    for (const auto& [gpu, count] : scenario.gpus) {
      const fp::GpuType* type = catalog.find(gpu);
      request.pools.push_back({type->name, "zone-a", "zone-a", count, type->gpus_per_node});
    }
    request.options.max_plans = 1;
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
    std::printf("%s\n", scenario.name);
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
                  tokens(plain.result) > 0 ? tokens(fast.result) / tokens(plain.result) : 0.0,
                  plain.result.rejection_counts.count("truncated") ? " (some DPs truncated)" : "");
    std::printf("  speedup over baseline %.1fx, throughput ratio %.4f", slow.seconds / fast.seconds,
                tokens(slow.result) > 0 ? tokens(fast.result) / tokens(slow.result) : 0.0);
    if (scenario.sailor_seconds > 0) std::printf(", Sailor reported %.1f s", scenario.sailor_seconds);
    if (scenario.goal_seconds > 0) {
      const bool met = fast.seconds < scenario.goal_seconds;
      goals_met = goals_met && met;
      std::printf(", goal < %.1f s: %s", scenario.goal_seconds, met ? "met" : "NOT met");
    }
    std::printf("\n\n");
  }
  return goals_met ? 0 : 1;
}
