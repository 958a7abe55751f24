#include "planner/exhaustive.h"

#include <algorithm>

#include "planner/search_space.h"

namespace flotilla::planner {
namespace {

class Enumerator {
 public:
  Enumerator(const SearchRequest& request, const EvalContext& context, SearchResult& result,
             std::int64_t max_evaluations)
      : request_(request), context_(context), result_(result), limit_(max_evaluations) {
    pools_ = merged_pools(request, *context.catalog);
    blocks_ = request.model.num_blocks();
    max_stages_ = request.options.max_stages > 0 ? std::min(request.options.max_stages, blocks_)
                                                  : blocks_;
  }

  void run() {
    run_over_pools();
    if (request_.options.mix_types_within_stage && !over_limit_) {
      // The same mixed-type pools as search.h (mixed_pool_sets()).
      std::deque<GpuType> storage;
      for (auto& pools : mixed_pool_sets(merged_pools(request_, *context_.catalog), request_.model,
                                         *context_.compute, storage)) {
        pools_ = std::move(pools);
        run_over_pools();
        if (over_limit_) break;
      }
    }
    if (over_limit_) {
      result_.plans.clear();
      result_.failure = "instance too large for exhaustive search (more than " + std::to_string(limit_) + " plans)";
      return;
    }
    result_.failure = result_.plans.empty() ? "no feasible plan in the whole space" : "";
  }

 private:
  void run_over_pools() {
    int total = 0;
    for (const SearchPool& pool : pools_) total += pool.gpus;
    for (int mbs : micro_batch_sizes(request_)) {
      for (int dp : dp_degrees(request_, mbs, total)) {
        configs_ = stage_configs(request_, pools_, dp);
        if (configs_.empty()) continue;
        mbs_ = mbs;
        dp_ = dp;
        used_.assign(pools_.size(), 0);
        choices_.clear();
        extend(0);
        if (over_limit_) return;
      }
    }
  }

  void extend(int first_block) {
    if (over_limit_) return;
    if (first_block == blocks_) {
      consider();
      return;
    }
    if (static_cast<int>(choices_.size()) == max_stages_) return;
    for (int last = first_block + 1; last <= blocks_; ++last) {
      for (int c = 0; c < static_cast<int>(configs_.size()); ++c) {
        const StageConfig& config = configs_[c];
        const int gpus = config.tp * dp_;
        if (used_[config.pool] + gpus > pools_[config.pool].gpus) continue;
        used_[config.pool] += gpus;
        choices_.push_back({first_block, last, c});
        extend(last);
        choices_.pop_back();
        used_[config.pool] -= gpus;
      }
    }
  }

  void consider() {
    if (++result_.stats.evaluations > limit_) {
      over_limit_ = true;
      return;
    }
    ++result_.stats.plans_considered;
    Plan plan;
    if (!materialize_plan(request_, pools_, configs_, choices_, mbs_, dp_, plan).empty()) return;
    offer(std::move(plan));
    // A tied model's last stage beside stage 0 (search_space.h: Placement), when that differs.
    if (tied_placement_differs(request_, pools_, configs_, choices_) &&
        materialize_plan(request_, pools_, configs_, choices_, mbs_, dp_, plan, Placement::kLastBesideFirst).empty())
      offer(std::move(plan));
  }

  void offer(Plan plan) {
    const std::string signature = plan_signature(plan);
    for (const RankedPlan& kept : result_.plans)  // a mixed pool can rebuild a pure plan
      if (plan_signature(kept.plan) == signature) return;
    Evaluation evaluation = evaluate(plan, request_.model, context_);
    if (auto bad = violation(request_, plan, evaluation)) {
      ++result_.rejection_counts[bad->kind];
      return;
    }
    auto& plans = result_.plans;
    auto better = [&](const RankedPlan& a, const RankedPlan& b) {
      return better_plan(a.evaluation, a.plan.num_gpus(), a.plan.num_stages(), b.evaluation,
                         b.plan.num_gpus(), b.plan.num_stages(), request_.objective);
    };
    RankedPlan candidate{std::move(plan), std::move(evaluation)};
    const auto at = std::upper_bound(plans.begin(), plans.end(), candidate, better);
    if (at - plans.begin() >= request_.options.max_plans) return;
    plans.insert(at, std::move(candidate));
    if (static_cast<int>(plans.size()) > request_.options.max_plans) plans.pop_back();
  }

  const SearchRequest& request_;
  const EvalContext& context_;
  SearchResult& result_;
  std::int64_t limit_;
  std::vector<SearchPool> pools_;
  std::vector<StageConfig> configs_;
  std::vector<StageChoice> choices_;
  std::vector<int> used_;
  int blocks_ = 0;
  int max_stages_ = 1;
  int mbs_ = 1;
  int dp_ = 1;
  bool over_limit_ = false;
};

}  // namespace

SearchResult exhaustive_search(const SearchRequest& request, const EvalContext& context,
                               std::int64_t max_evaluations) {
  SearchResult result;
  if (request.global_batch_size <= 0 || context.catalog == nullptr ||
      context.compute == nullptr || context.network == nullptr) {
    result.failure = "exhaustive search needs a positive batch and catalog/compute/network models";
    return result;
  }
  Enumerator(request, context, result, max_evaluations).run();
  return result;
}

}  // namespace flotilla::planner
