#include "planner/suggest.h"

#include "common/significant_digits.h"

#include <algorithm>

namespace flotilla::planner {
namespace {

// Six significant digits stay within the 1e-4 margin applied to the value (any magnitude).
std::string six_digits(double value) { return significant_digits_text(value, 6); }

std::optional<RankedPlan> attempt(SearchRequest request, const EvalContext& context) {
  request.options.max_plans = 1;
  request.options.max_rejections = 0;
  // A trial at the default grouping: regrouping each of ~20 trials on a deep model costs
  // minutes, and a suggestion is already approximate (within 2x, see the header).
  request.options.regroup_when_empty = false;
  SearchResult result = search_plans(request, context);
  if (result.plans.empty()) return std::nullopt;
  return std::move(result.plans.front());
}

}  // namespace

std::optional<Suggestion> suggest_change(const SearchRequest& request, const EvalContext& context) {
  const SearchConstraints& c = request.constraints;
  // Constraints first: if only they rule plans out, say how far to move them.
  // Search with one of them dropped (the other kept) for the plan that comes closest to it,
  // and move that one just past the plan's value.
  const auto loosened = [&](std::optional<double> SearchConstraints::*constraint, Objective objective,
                            double value_margin, const char* flag, ChangeKind kind) -> std::optional<Suggestion> {
    SearchRequest loose = request;
    (loose.constraints.*constraint).reset();
    loose.objective = objective;
    std::optional<RankedPlan> plan = attempt(loose, context);
    if (!plan) return std::nullopt;
    const bool budget = constraint == &SearchConstraints::max_usd_per_iteration;
    const std::string value = six_digits(
        (budget ? plan->evaluation.usd_per_iteration : plan->evaluation.tokens_per_second) * value_margin);
    SearchRequest changed = request;
    changed.constraints.*constraint = std::stod(value);
    return Suggestion{std::string(flag) + value, std::move(*plan), kind, std::move(changed)};
  };
  if (c.max_usd_per_iteration)
    if (auto s = loosened(&SearchConstraints::max_usd_per_iteration, Objective::kMinCost, 1.0001,
                          "raise --max-usd-per-iter to ", ChangeKind::kRaiseBudget))
      return s;
  if (c.min_tokens_per_second)
    if (auto s = loosened(&SearchConstraints::min_tokens_per_second, Objective::kMaxThroughput, 0.9999,
                          "lower --min-tokens-per-s to ", ChangeKind::kLowerMinThroughput))
      return s;
  // No new hardware: recompute activations.
  const Recompute levels[] = {Recompute::kSelective, Recompute::kFull};
  const char* names[] = {"selective", "full"};
  for (int i = 0; i < 2 && request.options.suggest_recompute; ++i) {
    if (request.training.recompute == levels[i] ||
        (i == 0 && request.training.recompute == Recompute::kFull))
      continue;
    SearchRequest changed = request;
    changed.training.recompute = levels[i];
    if (auto plan = attempt(changed, context))
      return Suggestion{std::string("enable ") + names[i] + " activation recompute (--recompute " +
                            names[i] + ")",
                        std::move(*plan), ChangeKind::kRecompute, std::move(changed)};
  }
  // Larger TP where small nodes capped it (H1 keeps TP inside a node).
  const int max_tp = request.options.tp_degrees.empty()
                         ? 1
                         : *std::max_element(request.options.tp_degrees.begin(),
                                             request.options.tp_degrees.end());
  for (int k = 2; k <= max_tp; k *= 2) {
    for (std::size_t p = 0; p < request.pools.size(); ++p) {
      const GpuPool& pool = request.pools[p];
      if (pool.largest_node_gpus >= k || pool.gpus < k) continue;
      SearchRequest changed = request;
      for (GpuPool& other : changed.pools)
        if (other.gpu_type == pool.gpu_type) other.largest_node_gpus = std::max(other.largest_node_gpus, k);
      if (auto plan = attempt(changed, context))
        return Suggestion{"use TP >= " + std::to_string(k) + ": nodes with " + std::to_string(k) +
                              " " + pool.gpu_type + " GPUs each (now " +
                              std::to_string(pool.largest_node_gpus) + " per node)",
                          std::move(*plan), ChangeKind::kLargerNodes, std::move(changed),
                          pool.gpu_type, 0, k};
    }
  }
  // More GPUs of a type already there: the fewest added that fit, over all types.
  std::optional<Suggestion> best;
  int best_added = 0;
  std::vector<std::string> types;
  for (const GpuPool& pool : request.pools)
    if (std::find(types.begin(), types.end(), pool.gpu_type) == types.end()) types.push_back(pool.gpu_type);
  for (const std::string& type : types) {
    int have = 0;
    for (const GpuPool& pool : request.pools)
      if (pool.gpu_type == type) have += pool.gpus;
    for (int factor = 2; factor <= 16; factor *= 2) {
      const int added = have * (factor - 1);
      if (best && added >= best_added) break;
      SearchRequest changed = request;
      for (GpuPool& pool : changed.pools)
        if (pool.gpu_type == type) pool.gpus *= factor;
      if (auto plan = attempt(changed, context)) {
        best = Suggestion{"add " + std::to_string(added) + " more " + type + " GPUs (" +
                              std::to_string(have + added) + " in all)",
                          std::move(*plan), ChangeKind::kMoreGpus, std::move(changed), type, added};
        best_added = added;
        break;
      }
    }
  }
  if (best) return best;
  // A larger-memory GPU type from the catalog, in whole nodes.
  std::int64_t largest_here = 0;
  for (const GpuPool& pool : request.pools)
    if (const GpuType* gpu = context.catalog->find(pool.gpu_type))
      largest_here = std::max(largest_here, gpu->memory_bytes);
  std::vector<const GpuType*> bigger;
  for (const GpuType& gpu : context.catalog->types())
    if (gpu.memory_bytes > largest_here) bigger.push_back(&gpu);
  std::sort(bigger.begin(), bigger.end(), [](const GpuType* a, const GpuType* b) {
    return a->memory_bytes != b->memory_bytes ? a->memory_bytes < b->memory_bytes : a->name < b->name;
  });
  for (const GpuType* gpu : bigger) {
    for (int nodes = 1; nodes <= 16; nodes *= 2) {
      SearchRequest changed = request;
      const std::string zone = request.pools.empty() ? "default" : request.pools.front().zone;
      changed.pools.push_back({gpu->name, zone, zone, nodes * gpu->gpus_per_node, gpu->gpus_per_node});
      if (auto plan = attempt(changed, context))
        return Suggestion{"add " + std::to_string(nodes * gpu->gpus_per_node) + " " + gpu->name +
                              " GPUs (" + std::to_string(nodes) + " node" + (nodes > 1 ? "s" : "") + ")",
                          std::move(*plan), ChangeKind::kNewGpuType, std::move(changed), gpu->name,
                          nodes * gpu->gpus_per_node, gpu->gpus_per_node};
    }
  }
  return std::nullopt;
}

}  // namespace flotilla::planner
