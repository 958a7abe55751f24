#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <set>

#include "planner/search_proxy.h"
#include "planner/search_space.h"
#include "planner/stage_dp.h"
#include "planner/stage_dp_memo.h"

namespace flotilla::planner {

bool better_plan(const Evaluation& a, int gpus_a, int stages_a, const Evaluation& b, int gpus_b,
                 int stages_b, Objective objective) {
  auto close = [](double x, double y) { return std::abs(x - y) <= 1e-9 * std::max(x, y); };
  if (objective == Objective::kMaxThroughput) {
    if (!close(a.tokens_per_second, b.tokens_per_second))
      return a.tokens_per_second > b.tokens_per_second;
    if (gpus_a != gpus_b) return gpus_a < gpus_b;
    if (!close(a.usd_per_iteration, b.usd_per_iteration))
      return a.usd_per_iteration < b.usd_per_iteration;
  } else {
    if (!close(a.usd_per_iteration, b.usd_per_iteration))
      return a.usd_per_iteration < b.usd_per_iteration;
    if (!close(a.tokens_per_second, b.tokens_per_second))
      return a.tokens_per_second > b.tokens_per_second;
    if (gpus_a != gpus_b) return gpus_a < gpus_b;
  }
  return stages_a < stages_b;
}

namespace {

// Collects feasible plans and rejection lines; keeps the ranking deterministic.
class Collector {
 public:
  Collector(const SearchRequest& request, SearchResult& result)
      : request_(request), result_(result) {}

  void reject(const std::string& kind, std::string what, std::string why) {
    ++result_.rejection_counts[kind];
    // A few lines per kind, so one flood (e.g. thousands over budget) does not hide the rest.
    if (static_cast<int>(result_.rejections.size()) < request_.options.max_rejections &&
        ++lines_per_kind_[kind] <= kLinesPerKind && seen_.insert(kind + "|" + why).second)
      result_.rejections.push_back({kind, std::move(what), std::move(why)});
  }

  // Returns true when the plan is feasible and was kept.
  bool offer(Plan plan, const EvalContext& context) {
    const std::string signature = describe_plan(plan);
    if (!offered_.insert(plan_signature(plan)).second) return false;
    ++result_.stats.evaluations;
    Evaluation evaluation = evaluate(plan, request_.model, context);
    if (auto bad = violation(request_, plan, evaluation)) {
      reject(bad->kind, signature, bad->why);
      return false;
    }
    result_.plans.push_back({std::move(plan), std::move(evaluation)});
    return true;
  }

  void rank() {
    std::stable_sort(result_.plans.begin(), result_.plans.end(),
                     [&](const RankedPlan& a, const RankedPlan& b) {
                       return better_plan(a.evaluation, a.plan.num_gpus(), a.plan.num_stages(),
                                          b.evaluation, b.plan.num_gpus(), b.plan.num_stages(),
                                          request_.objective);
                     });
  }

 private:
  const SearchRequest& request_;
  SearchResult& result_;
  static constexpr int kLinesPerKind = 3;
  std::set<std::string> seen_;
  std::set<std::string> offered_;
  std::map<std::string, int> lines_per_kind_;
};

// A complete DP state worth evaluating, with its proxy numbers.
struct Pending {
  int penalty = 0;        // constraints the proxy says it breaks
  double value = 0;       // objective proxy: iter seconds (throughput) or USD/iter (cost)
  int mbs = 1;
  int dp = 1;
  int config_set = 0;     // index into Searcher::config_sets_
  int stages = 0;
  float slowest_stage_seconds = 0;  // the DP's value, for refine()
  std::vector<StageChoice> choices;
};

class Searcher {
 public:
  // `pools`: the pools to search (mixed_pool_sets()); null: the request's own.
  // `known_best`: the objective (iteration seconds, or USD per iteration) of a plan already
  // found, which seeds the branch and bound.
  // `beamed_dp`: the largest D another search over these pools (or fewer) already had to search
  // by beams; runs at that D or below skip the capped exact run (seed_bound()).
  // `memo`: solved DP runs shared with other searches (the mixed-type passes); null: none.
  Searcher(const SearchRequest& request, const EvalContext& context, SearchResult& result,
           const std::vector<SearchPool>* pools = nullptr, std::optional<double> known_best = std::nullopt,
           int beamed_dp = 0, StageDpMemo* memo = nullptr)
      : request_(request), context_(context), result_(result), collector_(request, result),
        best_feasible_value_(known_best), beamed_dp_(beamed_dp), memo_(memo) {
    pools_ = pools != nullptr ? *pools : merged_pools(request, *context.catalog);
    if (request.options.group_pools_across_regions) pools_ = group_pools_across_regions(request, pools_);
    for (const SearchPool& pool : pools_) total_gpus_ += pool.gpus;
    blocks_ = request.model.num_blocks();
    max_stages_ = request.options.max_stages > 0 ? std::min(request.options.max_stages, blocks_)
                                                  : blocks_;
  }

  int beamed_dp() const { return beamed_dp_; }

  void run() {
    if (pools_.empty()) {
      result_.failure = "no free GPUs of a known type in the cluster";
      return;
    }
    for (int mbs : micro_batch_sizes(request_)) search_micro_batch(mbs);
    evaluate_best();
    collector_.rank();
    auto& plans = result_.plans;
    if (static_cast<int>(plans.size()) > request_.options.max_plans)
      plans.resize(request_.options.max_plans);
    if (plans.empty()) result_.failure = failure_line();
  }

 private:
  bool throughput() const { return request_.objective == Objective::kMaxThroughput; }

  double tokens_per_iteration() const {
    return static_cast<double>(request_.global_batch_size) * request_.model.seq_len;
  }

  // Branch and bound for the stage DP. time_model.h's iteration is fill + (m - 1) x straggler
  // + sync, with straggler >= the slowest cycle S and fill >= max(S, F), F = `fill_floor_seconds`
  // (every block's fastest forward + backward over the configs: each block runs once in the
  // fill, on some config). So a pipeline beats the best plan B (throughput) only if
  // (m - 1) S + max(S, F) < B: S < B / m when F <= B / m, else S < (B - F) / (m - 1). The
  // first form alone (iteration >= m x S) let deep splits through at small m. The throughput
  // floor and the cost objective keep the m x S form.
  double stage_bound(int m, int dp, double fill_floor_seconds) const {
    double bound = 1e300;
    if (request_.constraints.min_tokens_per_second)
      bound = std::min(bound, tokens_per_iteration() / *request_.constraints.min_tokens_per_second / m);
    if (request_.options.branch_and_bound && throughput() && best_feasible_value_) {
      const double best = *best_feasible_value_ * kBoundSlack;
      if (fill_floor_seconds <= best / m) bound = std::min(bound, best / m);
      else bound = std::min(bound, m > 1 ? std::max(0.0, best - fill_floor_seconds) / (m - 1) : 0.0);
    }
    if (request_.options.branch_and_bound && !throughput() && best_feasible_value_) {
      // cost >= (cheapest GPU-second) x D x m x slowest cycle
      double cheapest = 1e300;
      for (const SearchPool& pool : pools_) cheapest = std::min(cheapest, pool.gpu->usd_per_hour / 3600.0);
      if (cheapest > 0) bound = std::min(bound, *best_feasible_value_ * kBoundSlack / (cheapest * dp * m));
    }
    return bound;
  }

  // Forward + backward of one micro-batch through every block, each block on its fastest config.
  static double fill_floor_seconds(const StageDpTimes& times) {
    if (times.prefix.empty()) return 0;
    double floor = 0;
    for (std::size_t b = 0; b + 1 < times.prefix.front().size(); ++b) {
      double fastest = 1e300;
      for (const std::vector<double>& prefix : times.prefix) fastest = std::min(fastest, prefix[b + 1] - prefix[b]);
      floor += fastest;
    }
    return floor;
  }

  // Best proxy objective (lower is better) among constraint-respecting candidates of one
  // (mbs, D); nullopt when none.
  std::optional<double> search_point(int mbs, int dp, ProxyTimer& timer) {
    // Kept for the whole search (a deque: references stay valid): the solver and the pending
    // candidates point into it.
    const int set = static_cast<int>(config_sets_.size());
    const std::vector<StageConfig>& configs =
        config_sets_.emplace_back(stage_configs(request_, pools_, dp));
    const std::string what = "mbs " + std::to_string(mbs) + ", D " + std::to_string(dp);
    if (configs.empty()) {
      collector_.reject("too-few-gpus", what, "no pool has " + std::to_string(dp) +
                                                  " free GPUs for D replicas");
      return std::nullopt;
    }
    if (request_.options.heuristics) {
      const auto known = oom_block_by_dp_.find(dp);
      if (known != oom_block_by_dp_.end() && known->second.first <= mbs) {
        collector_.reject("oom", what, known->second.second);
        return std::nullopt;
      }
    }
    const StageDpTimes times = stage_dp_times(timer, configs, dp);
    StageDpInput input = stage_dp_input(request_, context_, pools_, configs, times, mbs, dp, max_stages_);
    const int m = input.num_micro_batches;
    const double fill_floor = fill_floor_seconds(times);
    input.max_stage_seconds = stage_bound(m, dp, fill_floor);
    input.quadratic_reference = request_.options.quadratic_stage_dp;
    input.max_units = request_.options.max_stage_dp_positions;
    std::optional<StageDp> dp_solver(std::in_place, input);
    if (request_.options.heuristics) {
      // H2: a block that fits no (GPU, TP) alone rules out this (mbs, D) before the DP.
      for (int b = 0; b < blocks_; ++b) {
        if (dp_solver->block_fits_somewhere(b)) continue;
        const std::string name = b == 0 ? "the embedding (block 0)"
                                 : b == blocks_ - 1
                                     ? "the LM head (block " + std::to_string(b) + ")"
                                     : "layer " + std::to_string(b);
        const std::string line = "OOM: " + name + " alone exceeds every free GPU's memory at the largest TP allowed";
        collector_.reject("oom", what, line);
        oom_block_by_dp_.emplace(dp, std::make_pair(mbs, line));
        return std::nullopt;
      }
    }
    // Most (mbs, D) runs that find nothing on a large cluster are ruled out by the DP's cheap
    // relaxation (exact: it only says no when solve() would find nothing).
    const bool ruled_out = request_.options.prune_by_relaxation && dp_solver->cannot_complete();
    if (ruled_out) {
      ++result_.stats.dp_runs_ruled_out;
    } else if (bool first_beam = false; seed_bound(input, configs, dp, m, timer, dp_solver, first_beam)) {
      ++result_.stats.beam_dp_runs;
      const double bound = stage_bound(m, dp, fill_floor);
      // A first beam that found no plan left the bound as it ran under: the second beam would
      // be the same run (GPT-3-175B's D 128 on 14,336 GPUs, and the mixed passes'), so it is kept.
      if (!first_beam || bound != input.max_stage_seconds) {
        input.max_stage_seconds = bound;
        input.max_states_per_depth = kBeamStatesPerDepth;
        StageDp beam(input);
        beam.reuse_memory_rows(*dp_solver);
        dp_solver.emplace(std::move(beam));
        solve(input, *dp_solver);
      }
    }
    StageDp& solver = *dp_solver;
    if (!ruled_out) ++result_.stats.dp_runs;
    result_.stats.layers_per_dp_position =
        std::max(result_.stats.layers_per_dp_position, solver.layers_per_position());
    result_.stats.dp_states += solver.states();
    if (solver.truncated())
      collector_.reject("truncated", what,
                        "stage DP stopped at its state budget; deeper pipelines not explored");
    std::vector<DpCandidate> found = solver.candidates();
    result_.stats.plans_considered += static_cast<std::int64_t>(found.size());
    if (found.empty()) {
      const SearchConstraints& c = request_.constraints;
      const double floor_bound =
          c.min_tokens_per_second ? tokens_per_iteration() / *c.min_tokens_per_second / m : 1e300;
      if (input.max_stage_seconds < 1e300 && input.max_stage_seconds >= floor_bound) {
        // The throughput floor, not a better plan, ruled every pipeline out: say so.
        collector_.reject("below-min-throughput", what,
                          "below minimum throughput: no pipeline's slowest stage is fast enough "
                          "for " + fixed_digits(*c.min_tokens_per_second, 0) + " tokens/s (predicted)");
      } else if (input.max_stage_seconds < 1e300) {
        ++result_.rejection_counts["pruned-bound"];
      } else {
        collector_.reject("oom", what,
                          "no split into stages fits in memory with the free GPUs (OOM or too "
                          "few GPUs at every depth)");
      }
      return std::nullopt;
    }
    if (!keep_gpu_count(found, dp, what)) return std::nullopt;
    // No region re-check: the DP's usage dimensions per TP level (stage_dp.cpp) are exactly
    // regions_hold()'s condition, so every candidate holds (StageDpTest.
    // CandidatesOnPoolsGroupedAcrossRegionsHoldTheirRegions); re-checking each was ~3 % of a
    // 14,336-GPU search. materialize_plan() still refuses a split that does not place.
    const std::vector<StageConfig>& kept_configs = configs;

    std::optional<double> best;
    std::vector<std::vector<Pending>> by_depth(max_stages_ + 1);
    // Proxy numbers of a split; `report` files the constraint rejections (once per candidate).
    auto score = [&](const DpCandidate& candidate, bool report) {
      const ProxyTimer::Estimate e = timer.estimate(candidate.choices, kept_configs, dp, m);
      Pending pending;
      pending.value = throughput() ? e.iter_seconds : e.usd_per_iteration;
      const SearchConstraints& c = request_.constraints;
      if (c.max_usd_per_iteration && e.usd_per_iteration > *c.max_usd_per_iteration) {
        ++pending.penalty;
        if (report)
          proxy_reject("over-budget", what, candidate.stages,
                       "over budget: " + fixed_digits(e.usd_per_iteration, 4) + " USD/iter > " +
                           fixed_digits(*c.max_usd_per_iteration, 4) + " (predicted)");
      }
      if (c.min_tokens_per_second && tokens_per_iteration() / e.iter_seconds < *c.min_tokens_per_second) {
        ++pending.penalty;
        if (report)
          proxy_reject("below-min-throughput", what, candidate.stages,
                       "below minimum throughput: " + fixed_digits(tokens_per_iteration() / e.iter_seconds, 0) +
                           " tokens/s < " + fixed_digits(*c.min_tokens_per_second, 0) + " (predicted)");
      }
      pending.mbs = mbs;
      pending.dp = dp;
      pending.config_set = set;
      pending.stages = candidate.stages;
      pending.slowest_stage_seconds = candidate.slowest_stage_seconds;
      return pending;  // without choices: the caller copies or moves them in
    };
    auto note = [&](const Pending& pending) {
      if (pending.penalty != 0) return;
      if (!best || pending.value < *best) best = pending.value;
      if (!best_feasible_value_ || pending.value < *best_feasible_value_) best_feasible_value_ = pending.value;
    };
    auto before = [](const Pending& a, const Pending& b) {
      return a.penalty != b.penalty ? a.penalty < b.penalty : a.value < b.value;
    };
    for (DpCandidate& candidate : found) {
      Pending pending = score(candidate, true);
      pending.choices = std::move(candidate.choices);  // the candidate is done with
      note(pending);
      by_depth[candidate.stages].push_back(std::move(pending));
    }
    // Per depth, the few best by the proxy wait for evaluate(). When the DP grouped layers,
    // each is first re-split over single layers (same stages, GPUs and TP), kept if better.
    for (auto& list : by_depth) {
      std::sort(list.begin(), list.end(), before);
      for (std::size_t i = 0; i < list.size() && i < kCandidatesPerDepth; ++i) {
        if (solver.layers_per_position() > 1) {
          DpCandidate candidate;
          candidate.stages = list[i].stages;
          candidate.slowest_stage_seconds = list[i].slowest_stage_seconds;
          candidate.choices = list[i].choices;
          solver.refine(candidate);
          Pending refined = score(candidate, false);
          refined.choices = candidate.choices;
          if (before(refined, list[i])) {
            note(refined);
            list[i] = std::move(refined);
          }
        }
        pending_.push_back(std::move(list[i]));
      }
    }
    return best;
  }

  // On a large cluster the exact DP's states run into the budget, and a DP truncated at it keeps
  // whichever states came first (14,336 GPUs: Llama-3-8B's best plan was lost, Llama-2-70B found
  // none). So the DP first runs capped at kSeedStates; complete, it is the answer. Otherwise a
  // beam (the most promising kBeamStatesPerDepth states per depth) finds pipelines that are real
  // plans (memory and regions checked by the DP); the best one's proxy value tightens the bound,
  // and a second beam runs under it. Heuristic, like the truncation it replaces; said in
  // docs/planner.md ("Not implemented / caveats").
  // `first_beam`: set when the first (unbounded) beam ran; `full` then holds it, solved.
  bool seed_bound(const StageDpInput& input, const std::vector<StageConfig>& configs, int dp, int m,
                  ProxyTimer& timer, std::optional<StageDp>& full, bool& first_beam) {
    if (!request_.options.beam_when_truncated || !request_.options.branch_and_bound || !request_.options.heuristics ||
        input.max_states <= kSeedStates) {
      solve(input, *full);
      return false;
    }
    // States grow as D shrinks, and do not shrink as the micro-batch grows (a stage holds fewer
    // blocks, so pipelines get deeper): once a D needed the beam, that D and smaller ones, at
    // this and larger micro-batch sizes, skip the capped exact run (a truncated one costs about
    // as much as a beam, and was thrown away).
    if (dp > beamed_dp_) {
      StageDpInput seed = input;
      seed.max_states = kSeedStates;
      seed.stop_when_truncated = true;  // a truncated seed is discarded
      StageDp solver(seed);
      solver.reuse_memory_rows(*full);
      solve(seed, solver);
      if (!solver.truncated()) {  // complete: it is the full run
        full.emplace(std::move(solver));
        return false;
      }
    }
    beamed_dp_ = std::max(beamed_dp_, dp);
    if (best_feasible_value_) return true;  // already bounded: one beam, under that bound
    StageDpInput beam_input = input;
    beam_input.max_states_per_depth = kBeamStatesPerDepth;
    {
      StageDp first(beam_input);
      first.reuse_memory_rows(*full);
      full.emplace(std::move(first));
    }
    StageDp& beam = *full;
    solve(beam_input, beam);
    first_beam = true;
    const SearchConstraints& c = request_.constraints;
    for (const DpCandidate& candidate : beam.candidates()) {
      int gpus = 0;
      for (int units : candidate.usage) gpus += units * dp;
      if (gpu_count_violation(c, gpus)) continue;  // regions hold: the DP counts them (above)
      const ProxyTimer::Estimate e = timer.estimate(candidate.choices, configs, dp, m);
      if (c.max_usd_per_iteration && e.usd_per_iteration > *c.max_usd_per_iteration) continue;
      if (c.min_tokens_per_second && tokens_per_iteration() / e.iter_seconds < *c.min_tokens_per_second) continue;
      const double value = throughput() ? e.iter_seconds : e.usd_per_iteration;
      if (!best_feasible_value_ || value < *best_feasible_value_) best_feasible_value_ = value;
    }
    return true;
  }

  // Solves `solver` (built from `input`), or takes an identical earlier run's outcome from the
  // memo the mixed-type passes share.
  void solve(const StageDpInput& input, StageDp& solver) {
    if (memo_ == nullptr) {
      solver.solve();
      return;
    }
    if (memo_->solve(input, solver)) ++result_.stats.dp_solves_recalled;
  }

  // Drops the DP's candidates whose GPU count (D x usage) is outside the request's range:
  // exact, since the DP keeps one candidate per usage vector. False when none is left.
  bool keep_gpu_count(std::vector<DpCandidate>& found, int dp, const std::string& what) {
    const SearchConstraints& c = request_.constraints;
    if (!c.min_gpus && !c.max_gpus) return true;
    std::vector<DpCandidate> kept;
    for (DpCandidate& candidate : found) {
      int gpus = 0;
      for (int units : candidate.usage) gpus += units * dp;
      if (auto why = gpu_count_violation(c, gpus)) {
        proxy_reject("gpu-count", what, candidate.stages, *why);
        continue;
      }
      kept.push_back(std::move(candidate));
    }
    found = std::move(kept);
    return !found.empty();
  }

  void proxy_reject(const std::string& kind, const std::string& what, int stages, std::string why) {
    collector_.reject(kind, what + ", " + std::to_string(stages) + " stages", std::move(why));
  }

  // evaluate() decides: best proxy first, until enough feasible plans are kept.
  void evaluate_best() {
    std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
      return a.penalty != b.penalty ? a.penalty < b.penalty : a.value < b.value;
    });
    int evaluated = 0;
    for (const Pending& pending : pending_) {
      if (static_cast<int>(result_.plans.size()) >= request_.options.max_plans + kSpareEvaluations ||
          evaluated >= kMaxEvaluations)
        break;
      Plan plan;
      const std::string why = materialize_plan(request_, pools_, config_sets_[pending.config_set],
                                               pending.choices, pending.mbs, pending.dp, plan);
      if (!why.empty()) {
        collector_.reject("too-few-gpus", describe_plan(plan), why);
        continue;
      }
      ++evaluated;
      // A tied model's last stage beside stage 0 (search_space.h: Placement), when that differs.
      const std::vector<StageConfig>& configs = config_sets_[pending.config_set];
      Plan beside;
      const bool try_beside =
          tied_placement_differs(request_, pools_, configs, pending.choices) &&
          materialize_plan(request_, pools_, configs, pending.choices, pending.mbs, pending.dp, beside,
                           Placement::kLastBesideFirst).empty() &&
          plan_signature(beside) != plan_signature(plan);
      collector_.offer(std::move(plan), context_);
      if (try_beside) collector_.offer(std::move(beside), context_);
    }
  }

  void search_micro_batch(int mbs) {
    // Every stage puts D replicas in one pool, so D never exceeds the largest pool.
    int largest_pool = 0;
    for (const SearchPool& pool : pools_) largest_pool = std::max(largest_pool, largest_region_gpus(pool));
    if (request_.constraints.max_gpus) largest_pool = std::min(largest_pool, *request_.constraints.max_gpus);
    std::vector<int> degrees = dp_degrees(request_, mbs, largest_pool);
    // H3: throughput -> largest D first; H4: cost -> smallest D first.
    if (throughput()) std::reverse(degrees.begin(), degrees.end());
    ProxyTimer timer(request_, context_, pools_, mbs);
    std::optional<double> previous;
    for (std::size_t i = 0; i < degrees.size(); ++i) {
      const std::optional<double> best = search_point(mbs, degrees[i], timer);
      if (!request_.options.heuristics || !best) continue;
      if (previous && *best > *previous && i + 1 < degrees.size()) {
        const std::string rest = "mbs " + std::to_string(mbs) + ", D " +
                                 (throughput() ? "< " : "> ") + std::to_string(degrees[i]);
        collector_.reject(throughput() ? "pruned-h3" : "pruned-h4", rest,
                          throughput() ? "not explored (H3): throughput stopped increasing at D " +
                                             std::to_string(degrees[i])
                                       : "not explored (H4): cost stopped decreasing at D " +
                                             std::to_string(degrees[i]));
        break;
      }
      previous = best;
    }
  }

  std::string failure_line() const {
    const auto& counts = result_.rejection_counts;
    auto count = [&](const char* kind) {
      auto it = counts.find(kind);
      return it == counts.end() ? 0 : it->second;
    };
    // The most telling example: an OOM, else a broken constraint, else the first line.
    std::string first;
    for (const char* kind : {"oom", "over-budget", "below-min-throughput", "over-quota", "gpu-count"}) {
      for (const Rejection& r : result_.rejections) {
        if (first.empty() && r.kind == kind) first = r.what + ": " + r.why;
      }
    }
    if (first.empty() && !result_.rejections.empty())
      first = result_.rejections.front().what + ": " + result_.rejections.front().why;
    const std::string example = first.empty() ? "" : "; e.g. " + first;
    if (count("over-budget") > 0 || count("below-min-throughput") > 0 || count("over-quota") > 0)
      return "no plan meets the constraints (" + std::to_string(count("over-budget")) +
             " over budget, " + std::to_string(count("below-min-throughput")) +
             " below the minimum throughput, " + std::to_string(count("over-quota")) +
             " over quota)" + example;
    if (count("gpu-count") > 0)
      return "no plan that fits uses an allowed number of GPUs (" +
             std::to_string(count("gpu-count")) + " outside the range)" + example;
    return "the model fits nowhere on these GPUs (" + std::to_string(total_gpus_) + " free)" + example;
  }

  static constexpr std::size_t kCandidatesPerDepth = 3;
  // Large-cluster path (seed_bound()): the exact DP first runs capped at kSeedStates; only when
  // that cap is hit (never in the Sailor scenarios or the oracle tests) do beams of
  // kBeamStatesPerDepth states per depth replace it: one to find a plan that bounds, one under
  // that bound. Measured on 14,336 GPUs (docs/planner.md): 500 gave Llama-3-8B 1.69 M tokens/s
  // in 0.8 s, 2,000 gave 1.78 M in 2.5 s; the exact DP truncated at 400 k states gave 1.53 M.
  static constexpr std::int64_t kSeedStates = 20000;
  static constexpr std::int64_t kBeamStatesPerDepth = 500;
  static constexpr int kSpareEvaluations = 2;
  static constexpr int kMaxEvaluations = 200;
  // The bound uses proxy numbers; the slack keeps plans the proxy slightly over-estimates.
  static constexpr double kBoundSlack = 1.02;

  const SearchRequest& request_;
  const EvalContext& context_;
  SearchResult& result_;
  Collector collector_;
  std::vector<SearchPool> pools_;
  std::deque<std::vector<StageConfig>> config_sets_;
  // H2's verdicts by D: the block that fit no (GPU, TP) alone and the smallest micro-batch size
  // it failed at. A block's memory only grows with the micro-batch size and D fixes the configs,
  // so the same block fails every larger size at that D: those points are rejected without
  // building their tables (a 30,000-layer model built them for every size in every search).
  std::map<int, std::pair<int, std::string>> oom_block_by_dp_;
  std::vector<Pending> pending_;
  std::optional<double> best_feasible_value_;
  int beamed_dp_ = 0;  // the largest D searched by beams so far (0: none yet)
  StageDpMemo* memo_ = nullptr;
  int total_gpus_ = 0;
  int blocks_ = 0;
  int max_stages_ = 1;
};

}  // namespace

namespace {

constexpr std::size_t kMaxMixedPasses = 3;
constexpr int kMaxGpusForMixedPassesWithoutAPlan = 4096;

// Issue 13: one more search per pair of pools whose types a stage may mix (mixed_pool_sets());
// their plans join the ranking (duplicates of plans already found are dropped).
// `beamed_dp`: the largest D the one-type search needed beams for; the mixed pools (one more
// pool) have at least as many DP states, so there too those D skip the capped exact run.
void add_mixed_stage_plans(const SearchRequest& request, const EvalContext& context, SearchResult& result,
                           int beamed_dp) {
  std::deque<GpuType> storage;
  const std::vector<SearchPool> pools_all = merged_pools(request, *context.catalog);
  const auto sets = mixed_pool_sets(pools_all, request.model, *context.compute, storage);
  if (sets.empty()) return;
  // Nothing found on a large cluster: that is the stage DP's state budget or memory, not a type
  // running out, and full mixed passes there cost minutes (Llama-2-70B on 14,336 GPUs: 175 s).
  int total_gpus = 0;
  for (const SearchPool& p : pools_all) total_gpus += p.gpus;
  if (result.plans.empty() && total_gpus > kMaxGpusForMixedPassesWithoutAPlan) return;
  std::set<std::string> seen;
  for (const RankedPlan& p : result.plans) seen.insert(describe_plan(p.plan));
  // The best plan with one type per stage bounds the mixed passes: they only matter if they
  // beat it. (Their DP sees a mixed stage as its slower type, so the bound is conservative.)
  std::optional<double> known_best;
  if (!result.plans.empty()) {
    const Evaluation& e = result.plans.front().evaluation;
    known_best = request.objective == Objective::kMaxThroughput ? e.iter_seconds : e.usd_per_iteration;
  }
  // Mixing only helps where a type runs out: with one type per stage a stage already takes
  // the faster type alone, and the slowest replica sets the stage time. So a pair is searched
  // only when the best one-type plan leaves fewer than D GPUs of one of its pools (or no plan
  // was found); the oracle walks every pair.
  std::map<std::string, int> used;
  if (!result.plans.empty()) used = gpus_per_type(result.plans.front().plan);
  const int best_dp = result.plans.empty() ? 0 : result.plans.front().plan.dp();
  const auto runs_out = [&](const SearchPool& pool) {
    if (result.plans.empty()) return true;
    int free_of_type = 0;
    for (const SearchPool& p : pools_all)
      if (p.gpu_type == pool.gpu_type) free_of_type += p.gpus;
    const auto it = used.find(pool.gpu_type);
    return free_of_type - (it == used.end() ? 0 : it->second) < best_dp;
  };
  // Pairs worth a pass, most promising first: more run-out members, then more of the pair's
  // types in the best plan; at most kMaxMixedPasses (a large cluster has tens of pairs).
  std::vector<std::pair<int, std::size_t>> order;  // (-priority, set index)
  for (std::size_t i = 0; i < sets.size(); ++i) {
    const SearchPool& mixed = sets[i].back();
    int run_out = 0;
    for (const SearchPool& p : pools_all) {
      if (p.region != mixed.region) continue;
      const bool member = std::find(mixed.zone_gpu_types.begin(), mixed.zone_gpu_types.end(), p.gpu_type) !=
                          mixed.zone_gpu_types.end();
      if (member && runs_out(p)) ++run_out;
    }
    if (run_out == 0) continue;
    std::set<std::string> types(mixed.zone_gpu_types.begin(), mixed.zone_gpu_types.end());
    int in_best = 0;
    for (const std::string& t : types) in_best += used.count(t) ? 1 : 0;
    order.push_back({-(run_out * 4 + in_best), i});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (order.size() > kMaxMixedPasses) order.resize(kMaxMixedPasses);
  // Around the best one-type plan only: its micro-batch size, its D, twice and four times
  // its D (the replicas a run-out type could not add). Four times: the mixed optimum can be
  // a shallower pipeline at a larger D than the one-type best (SearchTest's 6 A100-40 +
  // 2 A100-80: D 1 x 3 stages one-type, D 4 x 1 stage mixed, once p2p charges every replica
  // sending from a node). Every D up to the pool's size cost 25-30 % more DP runs at 14,336
  // GPUs for the same plans. The full space when nothing was found. One request for every
  // pass: the memo compares the model and training options by address.
  SearchRequest around = request;
  if (!result.plans.empty()) {
    const Plan& best = result.plans.front().plan;
    around.options.micro_batch_sizes = {best.micro_batch_size};
    around.options.dp_degrees = {best.dp(), 2 * best.dp(), 4 * best.dp()};
  }
  // Passes in regions with the same pools solve the same DP runs (14,336 GPUs: us-east1 and
  // us-west1, state for state); the memo solves each once.
  StageDpMemo memo;
  StageDpMemo* shared_memo = request.options.reuse_identical_dp_runs ? &memo : nullptr;
  for (const auto& [priority, index] : order) {
    const std::vector<SearchPool>& pools = sets[index];
    SearchResult more;
    Searcher(around, context, more, &pools, known_best, beamed_dp, shared_memo).run();
    result.stats += more.stats;
    for (const auto& [kind, count] : more.rejection_counts) result.rejection_counts[kind] += count;
    for (RankedPlan& p : more.plans)
      if (seen.insert(describe_plan(p.plan)).second) result.plans.push_back(std::move(p));
  }
  std::stable_sort(result.plans.begin(), result.plans.end(), [&](const RankedPlan& a, const RankedPlan& b) {
    return better_plan(a.evaluation, a.plan.num_gpus(), a.plan.num_stages(), b.evaluation, b.plan.num_gpus(),
                       b.plan.num_stages(), request.objective);
  });
  if (static_cast<int>(result.plans.size()) > request.options.max_plans) result.plans.resize(request.options.max_plans);
  if (!result.plans.empty()) result.failure.clear();
}

// One search (with regrouping when a grouped one finds nothing); the whole search when no
// uniform TP is asked for.
SearchResult search_once(const SearchRequest& request, const EvalContext& context) {
  SearchResult result;
  if (request.global_batch_size <= 0) {
    result.failure = "global batch size must be positive";
    return result;
  }
  if (context.catalog == nullptr || context.compute == nullptr || context.network == nullptr) {
    result.failure = "search needs a GPU catalog, a compute model and a network model";
    return result;
  }
  if (request.model.num_layers <= 0 || request.model.num_layers > kMaxSearchLayers) {
    result.failure = "the model has " + std::to_string(request.model.num_layers) +
                     " transformer layers; the search handles 1 to " +
                     std::to_string(kMaxSearchLayers);
    return result;
  }
  Searcher searcher(request, context, result);
  searcher.run();
  int beamed_dp = searcher.beamed_dp();
  // Grouped positions can rule out every split that fits: a small GPU may hold one layer at
  // its in-flight count but not a group (Llama-2-7B at 128 layers on examples/cluster.yaml
  // fits only with single-layer V100 stages). Before saying nothing fits, search again with
  // twice the positions (exact once they cover every block), up to kMaxRegroupPositions.
  SearchRequest finer = request;
  while (request.options.regroup_when_empty && result.plans.empty() &&
         result.stats.layers_per_dp_position > 1 &&
         finer.options.max_stage_dp_positions < kMaxRegroupPositions) {
    finer.options.max_stage_dp_positions =
        std::min(2 * finer.options.max_stage_dp_positions, kMaxRegroupPositions);
    SearchResult retry;
    Searcher finer_searcher(finer, context, retry);
    finer_searcher.run();
    beamed_dp = finer_searcher.beamed_dp();
    retry.stats += result.stats;
    result = std::move(retry);
  }
  if (request.options.mix_types_within_stage) add_mixed_stage_plans(request, context, result, beamed_dp);
  if (result.plans.empty() && result.stats.layers_per_dp_position > 1)
    result.failure += " (searched with " + std::to_string(result.stats.layers_per_dp_position) +
                      " layers per stage-DP position; a split at single layers was not searched)";
  return result;
}


void merge_rejections(const SearchResult& from, int max_rejections, SearchResult& into) {
  for (const auto& [kind, count] : from.rejection_counts) into.rejection_counts[kind] += count;
  for (const Rejection& r : from.rejections) {
    if (static_cast<int>(into.rejections.size()) >= max_rejections) break;
    const bool seen = std::any_of(into.rejections.begin(), into.rejections.end(), [&](const Rejection& x) {
      return x.kind == r.kind && x.why == r.why;
    });
    if (!seen) into.rejections.push_back(r);
  }
}

void merge_stats(const SearchStats& from, SearchStats& into) {
  into.dp_runs += from.dp_runs;
  into.dp_states += from.dp_states;
  into.beam_dp_runs += from.beam_dp_runs;
  into.dp_runs_ruled_out += from.dp_runs_ruled_out;
  into.dp_solves_recalled += from.dp_solves_recalled;
  into.evaluations += from.evaluations;
  into.plans_considered += from.plans_considered;
  into.layers_per_dp_position = std::max(into.layers_per_dp_position, from.layers_per_dp_position);
}

// options.uniform_tp: one search per TP degree (each plan then has one TP for all stages),
// rankings merged by the objective.
SearchResult search_uniform_tp(const SearchRequest& request, const EvalContext& context) {
  std::vector<int> degrees = request.options.tp_degrees;
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  SearchResult merged;
  std::string tried, last_failure;
  for (int tp : degrees) {
    SearchRequest one = request;
    one.options.uniform_tp = false;
    one.options.tp_degrees = {tp};
    SearchResult result = search_once(one, context);
    for (RankedPlan& plan : result.plans) merged.plans.push_back(std::move(plan));
    merge_rejections(result, request.options.max_rejections, merged);
    merge_stats(result.stats, merged.stats);
    tried += (tried.empty() ? "" : ", ") + std::to_string(tp);
    if (!result.failure.empty()) last_failure = "at TP " + std::to_string(tp) + ": " + result.failure;
  }
  std::stable_sort(merged.plans.begin(), merged.plans.end(), [&](const RankedPlan& a, const RankedPlan& b) {
    return better_plan(a.evaluation, a.plan.num_gpus(), a.plan.num_stages(), b.evaluation,
                       b.plan.num_gpus(), b.plan.num_stages(), request.objective);
  });
  if (static_cast<int>(merged.plans.size()) > request.options.max_plans)
    merged.plans.resize(request.options.max_plans);
  if (merged.plans.empty())
    merged.failure = "no TP degree works for every stage (one TP for all stages; tried " + tried +
                     ")" + (last_failure.empty() ? "" : "; " + last_failure);
  return merged;
}

}  // namespace

SearchResult search_plans(const SearchRequest& request, const EvalContext& context) {
  std::vector<int> degrees = request.options.tp_degrees;
  std::sort(degrees.begin(), degrees.end());
  degrees.erase(std::unique(degrees.begin(), degrees.end()), degrees.end());
  if (request.options.uniform_tp && degrees.size() > 1) return search_uniform_tp(request, context);
  return search_once(request, context);
}

}  // namespace flotilla::planner
