#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "planner/time_model.h"
#include "planner/search_space.h"
#include "planner/stage_dp.h"

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
    if (static_cast<int>(result_.rejections.size()) < request_.options.max_rejections &&
        seen_.insert(kind + "|" + why).second)
      result_.rejections.push_back({kind, std::move(what), std::move(why)});
  }

  // Returns true when the plan is feasible and was kept.
  bool offer(Plan plan, const EvalContext& context) {
    const std::string signature = describe_plan(plan);
    if (!offered_.insert(signature).second) return false;
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
  std::set<std::string> seen_;
  std::set<std::string> offered_;
};

struct Scored {
  double iter_seconds = 0;      // proxy
  double usd_per_iteration = 0; // proxy
  const DpCandidate* candidate = nullptr;
};

class Searcher {
 public:
  Searcher(const SearchRequest& request, const EvalContext& context, SearchResult& result)
      : request_(request), context_(context), result_(result), collector_(request, result) {
    pools_ = merged_pools(request, *context.catalog);
    for (const SearchPool& pool : pools_) total_gpus_ += pool.gpus;
    blocks_ = request.model.num_blocks();
    max_stages_ = request.options.max_stages > 0 ? std::min(request.options.max_stages, blocks_)
                                                  : blocks_;
  }

  void run() {
    if (pools_.empty()) {
      result_.failure = "no free GPUs of a known type in the cluster";
      return;
    }
    for (int mbs : micro_batch_sizes(request_)) search_micro_batch(mbs);
    collector_.rank();
    auto& plans = result_.plans;
    if (static_cast<int>(plans.size()) > request_.options.max_plans)
      plans.resize(request_.options.max_plans);
    if (plans.empty()) result_.failure = failure_line();
  }

 private:
  // Best objective value among the plans kept for one (mbs, D); nullopt when none.
  std::optional<double> search_point(int mbs, int dp) {
    const std::vector<StageConfig> configs = stage_configs(request_, pools_, dp);
    const std::string what = "mbs " + std::to_string(mbs) + ", D " + std::to_string(dp);
    if (configs.empty()) {
      collector_.reject("too-few-gpus", what, "no pool has " + std::to_string(dp) +
                                                  " free GPUs for D replicas");
      return std::nullopt;
    }
    // Per config, from the time model itself: prefix sums of each block's forward + backward
    // (recompute included) and the p2p cycle a non-last stage adds.
    std::vector<std::vector<double>> prefix;
    std::vector<double> p2p_cycle;
    for (const StageConfig& config : configs) {
      const SearchPool& pool = pools_[config.pool];
      const std::vector<const GpuType*> one_gpu = {pool.gpu};
      Stage stage;
      stage.tp = config.tp;
      stage.replicas = {Replica{pool.gpu_type, pool.zones.front().first, 0}};
      std::vector<double> p(blocks_ + 1, 0.0);
      double p2p = 0;
      for (int b = 0; b < blocks_; ++b) {
        stage.first_block = b;
        stage.last_block = b + 1;
        const StageTiming t = stage_timing(request_.model, stage, one_gpu, mbs, request_.training,
                                           *context_.compute, *context_.network,
                                           LinkKind::kInterNode, LinkKind::kInterNode);
        p[b + 1] = p[b] + t.forward_s + t.backward_s;
        p2p = std::max(p2p, 2.0 * t.p2p_s);
      }
      prefix.push_back(std::move(p));
      p2p_cycle.push_back(p2p);
    }
    StageDpInput input;
    input.model = &request_.model;
    input.training = &request_.training;
    input.pools = &pools_;
    input.configs = &configs;
    input.time_prefix = &prefix;
    input.p2p_cycle_seconds = &p2p_cycle;
    input.memory_constants = &context_.memory_constants;
    input.micro_batch_size = mbs;
    input.dp = dp;
    input.num_micro_batches = request_.global_batch_size / (mbs * dp);
    input.max_stages = max_stages_;
    StageDp solver(input);
    if (request_.options.heuristics) {
      // H2: a block that fits no (GPU, TP) alone rules out this (mbs, D) before the DP.
      for (int b = 0; b < blocks_; ++b) {
        if (!solver.block_fits_somewhere(b)) {
          const std::string name = b == 0 ? "the embedding (block 0)"
                                   : b == blocks_ - 1
                                       ? "the LM head (block " + std::to_string(b) + ")"
                                       : "layer " + std::to_string(b);
          collector_.reject("oom", what,
                            "OOM: " + name +
                                " alone exceeds every free GPU's memory at the largest TP allowed");
          return std::nullopt;
        }
      }
    }
    solver.solve();
    ++result_.stats.dp_runs;
    result_.stats.dp_states += solver.states();
    if (solver.truncated())
      collector_.reject("truncated", what,
                        "stage DP stopped at its state budget; deeper pipelines not explored");
    const std::vector<DpCandidate> found = solver.candidates();
    result_.stats.plans_considered += static_cast<std::int64_t>(found.size());
    if (found.empty()) {
      collector_.reject("oom", what,
                        "no split into stages fits in memory with the free GPUs (OOM or too few "
                        "GPUs for every depth)");
      return std::nullopt;
    }
    const int m = input.num_micro_batches;
    std::vector<Scored> scored;
    scored.reserve(found.size());
    for (const DpCandidate& candidate : found)
      scored.push_back(score(candidate, configs, mbs, m, dp));

    // Per depth, the few best by the proxy go to evaluate(); the proxy ranks, evaluate() decides.
    std::optional<double> best;
    for (int depth = 1; depth <= max_stages_; ++depth) {
      std::vector<const Scored*> at_depth;
      for (const Scored& s : scored)
        if (s.candidate->stages == depth) at_depth.push_back(&s);
      if (at_depth.empty()) continue;
      std::sort(at_depth.begin(), at_depth.end(), [&](const Scored* a, const Scored* b) {
        return proxy_key(*a) < proxy_key(*b);
      });
      int kept = 0;
      for (const Scored* s : at_depth) {
        if (kept >= kCandidatesPerDepth) break;
        ++kept;
        Plan plan;
        const std::string why =
            materialize_plan(request_, pools_, configs, s->candidate->choices, mbs, dp, plan);
        if (!why.empty()) {
          collector_.reject("too-few-gpus", what, why);
          continue;
        }
        if (collector_.offer(plan, context_)) {
          const Evaluation& e = result_.plans.back().evaluation;
          const double value = request_.objective == Objective::kMaxThroughput
                                   ? e.tokens_per_second
                                   : -e.usd_per_iteration;
          if (!best || value > *best) best = value;
        }
      }
    }
    return best;
  }

  // Lower is better. Proxy-infeasible candidates sort after all proxy-feasible ones.
  std::pair<int, double> proxy_key(const Scored& s) const {
    const SearchConstraints& c = request_.constraints;
    const double tokens = tokens_per_iteration() / s.iter_seconds;
    int penalty = 0;
    if (c.max_usd_per_iteration && s.usd_per_iteration > *c.max_usd_per_iteration) ++penalty;
    if (c.min_tokens_per_second && tokens < *c.min_tokens_per_second) ++penalty;
    const double value = request_.objective == Objective::kMaxThroughput ? s.iter_seconds
                                                                          : s.usd_per_iteration;
    return {penalty, value};
  }

  double tokens_per_iteration() const {
    return static_cast<double>(request_.global_batch_size) * request_.model.seq_len;
  }

  // The time model on the candidate's stages (as evaluate() composes them, without the
  // per-rank memory report): cheap enough to score every complete DP state.
  Scored score(const DpCandidate& candidate, const std::vector<StageConfig>& configs, int mbs,
               int m, int dp) const {
    std::vector<StageTiming> timings;
    timings.reserve(candidate.choices.size());
    double usd_per_second = 0;
    Stage stage;
    std::vector<const GpuType*> gpus;
    for (std::size_t i = 0; i < candidate.choices.size(); ++i) {
      const StageChoice& choice = candidate.choices[i];
      const StageConfig& config = configs[choice.config];
      const SearchPool& pool = pools_[config.pool];
      stage.first_block = choice.first_block;
      stage.last_block = choice.last_block;
      stage.tp = config.tp;
      stage.replicas.assign(dp, Replica{pool.gpu_type, pool.zones.front().first, 0});
      gpus.assign(dp, pool.gpu);
      LinkKind to_next = LinkKind::kInterNode;
      if (i + 1 < candidate.choices.size()) {
        const SearchPool& next = pools_[configs[candidate.choices[i + 1].config].pool];
        to_next = std::max(to_next, context_.network->link_between(
                                        pool.zones.front().first, next.zones.front().first, false));
      }
      const LinkKind dp_link = dp > 1 && config.tp * dp <= pool.gpu->gpus_per_node &&
                                       config.tp * dp <= pool.zones.front().second
                                   ? LinkKind::kIntraNode
                                   : (config.tp * dp <= pool.zones.front().second
                                          ? LinkKind::kInterNode
                                          : LinkKind::kCrossZone);
      timings.push_back(stage_timing(request_.model, stage, gpus, mbs, request_.training,
                                     *context_.compute, *context_.network, to_next, dp_link));
      usd_per_second += pool.gpu->usd_per_hour / 3600.0 * config.tp * dp;
    }
    Scored s;
    s.candidate = &candidate;
    s.iter_seconds = pipeline_iter_seconds(timings, m).iter_seconds;
    s.usd_per_iteration = usd_per_second * s.iter_seconds;
    return s;
  }

  void search_micro_batch(int mbs) {
    // Every stage puts D replicas in one pool, so D never exceeds the largest pool.
    int largest_pool = 0;
    for (const SearchPool& pool : pools_) largest_pool = std::max(largest_pool, pool.gpus);
    std::vector<int> degrees = dp_degrees(request_, mbs, largest_pool);
    const bool throughput = request_.objective == Objective::kMaxThroughput;
    // H3: throughput -> largest D first; H4: cost -> smallest D first.
    if (throughput) std::reverse(degrees.begin(), degrees.end());
    std::optional<double> previous;
    for (std::size_t i = 0; i < degrees.size(); ++i) {
      const std::optional<double> best = search_point(mbs, degrees[i]);
      if (!request_.options.heuristics || !best) continue;
      if (previous && *best < *previous && i + 1 < degrees.size()) {
        const std::string rest = "mbs " + std::to_string(mbs) + ", D " +
                                 (throughput ? "< " : "> ") + std::to_string(degrees[i]);
        collector_.reject(throughput ? "pruned-h3" : "pruned-h4", rest,
                          throughput ? "not explored (H3): throughput stopped increasing at D " +
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
    // The most telling example: an evaluated OOM, else any memory failure, else the first.
    std::string first;
    for (const char* kind : {"oom", "over-budget", "below-min-throughput", "over-quota"}) {
      for (const Rejection& r : result_.rejections) {
        if (first.empty() && r.kind == kind) first = r.what + ": " + r.why;
      }
    }
    if (first.empty() && !result_.rejections.empty())
      first = result_.rejections.front().what + ": " + result_.rejections.front().why;
    if (count("over-budget") > 0 || count("below-min-throughput") > 0 || count("over-quota") > 0)
      return "no plan meets the constraints (" + std::to_string(count("over-budget")) +
             " over budget, " + std::to_string(count("below-min-throughput")) +
             " below the minimum throughput, " + std::to_string(count("over-quota")) +
             " over quota); e.g. " + first;
    return "the model fits nowhere on these GPUs (" + std::to_string(total_gpus_) +
           " free); e.g. " + first;
  }

  static constexpr int kCandidatesPerDepth = 3;

  const SearchRequest& request_;
  const EvalContext& context_;
  SearchResult& result_;
  Collector collector_;
  std::vector<SearchPool> pools_;
  int total_gpus_ = 0;
  int blocks_ = 0;
  int max_stages_ = 1;
};

}  // namespace

SearchResult search_plans(const SearchRequest& request, const EvalContext& context) {
  SearchResult result;
  if (request.global_batch_size <= 0) {
    result.failure = "global batch size must be positive";
    return result;
  }
  if (context.catalog == nullptr || context.compute == nullptr || context.network == nullptr) {
    result.failure = "search needs a GPU catalog, a compute model and a network model";
    return result;
  }
  Searcher searcher(request, context, result);
  searcher.run();
  return result;
}

}  // namespace flotilla::planner
