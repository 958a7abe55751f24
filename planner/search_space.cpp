#include "planner/search_space.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace flotilla::planner {
std::string fixed_digits(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

std::vector<SearchPool> merged_pools(const SearchRequest& request, const GpuCatalog& catalog) {
  std::map<std::pair<std::string, std::string>, SearchPool> by_key;
  for (const GpuPool& pool : request.pools) {
    const GpuType* gpu = catalog.find(pool.gpu_type);
    if (gpu == nullptr || pool.gpus <= 0) continue;
    int gpus = pool.gpus;
    if (auto cap = request.constraints.max_gpus_per_type.find(gpu->name);
        cap != request.constraints.max_gpus_per_type.end())
      gpus = std::min(gpus, cap->second);
    if (auto cap = request.constraints.max_gpus_per_zone.find(pool.zone);
        cap != request.constraints.max_gpus_per_zone.end())
      gpus = std::min(gpus, cap->second);
    if (gpus <= 0) continue;
    SearchPool& merged = by_key[{gpu->name, pool.region.empty() ? pool.zone : pool.region}];
    merged.gpu_type = gpu->name;
    merged.gpu = gpu;
    merged.region = pool.region.empty() ? pool.zone : pool.region;
    merged.zones.emplace_back(pool.zone, gpus);
    merged.gpus += gpus;
    const int node = pool.largest_node_gpus > 0 ? pool.largest_node_gpus : gpu->gpus_per_node;
    merged.max_tp = std::max(merged.max_tp, std::min(node, gpus));
  }
  std::vector<SearchPool> pools;
  for (auto& [key, pool] : by_key) {
    std::stable_sort(pool.zones.begin(), pool.zones.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (auto cap = request.constraints.max_gpus_per_type.find(pool.gpu_type);
        cap != request.constraints.max_gpus_per_type.end())
      pool.gpus = std::min(pool.gpus, cap->second);
    pools.push_back(std::move(pool));
  }
  return pools;
}

std::vector<std::vector<SearchPool>> mixed_pool_sets(const std::vector<SearchPool>& pools,
                                                     const ModelSpec& model, const ComputeModel& compute,
                                                     std::deque<GpuType>& storage) {
  std::vector<std::vector<SearchPool>> sets;
  const auto whole_model_seconds = [&](const GpuType& gpu) {
    const LayerTimes t = compute.stage_times(model, gpu, 0, model.num_blocks(), 1, 1);
    return t.forward_s + t.backward_s;
  };
  for (std::size_t i = 0; i < pools.size(); ++i) {
    for (std::size_t j = i + 1; j < pools.size(); ++j) {
      const SearchPool& a = pools[i];
      const SearchPool& b = pools[j];
      if (a.region != b.region || a.gpu_type == b.gpu_type || a.gpu == nullptr || b.gpu == nullptr) continue;
      const bool a_faster = whole_model_seconds(*a.gpu) <= whole_model_seconds(*b.gpu);
      const SearchPool& fast = a_faster ? a : b;
      const SearchPool& slow = a_faster ? b : a;
      GpuType& worst = storage.emplace_back(*slow.gpu);
      worst.memory_bytes = std::min(a.gpu->memory_bytes, b.gpu->memory_bytes);
      worst.runtime_overhead_bytes = std::max(a.gpu->runtime_overhead_bytes, b.gpu->runtime_overhead_bytes);
      worst.supports_flash_attention = a.gpu->supports_flash_attention && b.gpu->supports_flash_attention;
      worst.usd_per_hour = std::max(a.gpu->usd_per_hour, b.gpu->usd_per_hour);
      worst.gpus_per_node = std::min(a.gpu->gpus_per_node, b.gpu->gpus_per_node);
      SearchPool mixed;
      mixed.gpu_type = slow.gpu_type;
      mixed.gpu = &worst;
      mixed.region = a.region;
      mixed.gpus = a.gpus + b.gpus;
      mixed.max_tp = std::min(a.max_tp, b.max_tp);
      for (const SearchPool* part : {&fast, &slow}) {
        for (const auto& zone : part->zones) {
          mixed.zones.push_back(zone);
          mixed.zone_gpu_types.push_back(part->gpu_type);
        }
      }
      std::vector<SearchPool> set;
      for (std::size_t k = 0; k < pools.size(); ++k)
        if (k != i && k != j) set.push_back(pools[k]);
      set.push_back(std::move(mixed));
      sets.push_back(std::move(set));
    }
  }
  return sets;
}

std::vector<StageConfig> stage_configs(const SearchRequest& request,
                                       const std::vector<SearchPool>& pools, int dp) {
  std::vector<StageConfig> configs;
  for (int k = 0; k < static_cast<int>(pools.size()); ++k) {
    for (int tp : request.options.tp_degrees) {
      if (tp <= 0 || tp > pools[k].max_tp) continue;  // H1: TP stays inside one node
      if (request.model.heads % tp != 0 || request.model.effective_kv_heads() % tp != 0) continue;
      if (static_cast<long long>(tp) * dp > pools[k].gpus) continue;
      configs.push_back({k, tp});
    }
  }
  return configs;
}

std::vector<int> micro_batch_sizes(const SearchRequest& request) {
  std::vector<int> sizes;
  for (int mbs : request.options.micro_batch_sizes) {
    if (mbs > 0 && request.global_batch_size % mbs == 0) sizes.push_back(mbs);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::vector<int> dp_degrees(const SearchRequest& request, int micro_batch_size, int max_gpus) {
  std::vector<int> degrees;
  const int sequences = request.global_batch_size / micro_batch_size;
  const std::vector<int>& allowed = request.options.dp_degrees;
  for (int d = 1; d <= sequences && d <= max_gpus; ++d) {
    if (sequences % d != 0) continue;
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), d) != allowed.end()) degrees.push_back(d);
  }
  return degrees;
}

std::string materialize_plan(const SearchRequest& request, const std::vector<SearchPool>& pools,
                             const std::vector<StageConfig>& configs,
                             const std::vector<StageChoice>& choices, int micro_batch_size,
                             int dp, Plan& plan) {
  plan = Plan{};
  plan.micro_batch_size = micro_batch_size;
  plan.global_batch_size = request.global_batch_size;
  plan.options = request.training;
  std::vector<std::vector<int>> zone_left(pools.size());
  for (std::size_t k = 0; k < pools.size(); ++k) {
    for (const auto& [zone, gpus] : pools[k].zones) zone_left[k].push_back(gpus);
  }
  for (const StageChoice& choice : choices) {
    const StageConfig& config = configs[choice.config];
    const SearchPool& pool = pools[config.pool];
    Stage stage;
    stage.first_block = choice.first_block;
    stage.last_block = choice.last_block;
    stage.tp = config.tp;
    for (int r = 0; r < dp; ++r) {
      std::size_t z = 0;
      while (z < pool.zones.size() && zone_left[config.pool][z] < config.tp) ++z;
      if (z == pool.zones.size())
        return "not enough " + pool.gpu_type + " in " + pool.region + " for TP " +
               std::to_string(config.tp) + " x " + std::to_string(dp) + " replicas";
      zone_left[config.pool][z] -= config.tp;
      stage.replicas.push_back(
          {pool.zone_gpu_types.empty() ? pool.gpu_type : pool.zone_gpu_types[z], pool.zones[z].first, 0});
    }
    plan.stages.push_back(std::move(stage));
  }
  return "";
}

std::map<std::string, int> gpus_per_type(const Plan& plan) {
  std::map<std::string, int> used;
  for (const Stage& stage : plan.stages) {
    for (int r = 0; r < stage.dp(); ++r) used[stage.replicas[static_cast<std::size_t>(r)].gpu_type] += stage.replica_tp(r);
  }
  return used;
}

std::map<std::string, int> gpus_per_zone(const Plan& plan) {
  std::map<std::string, int> used;
  for (const Stage& stage : plan.stages) {
    for (int r = 0; r < stage.dp(); ++r) used[stage.replicas[static_cast<std::size_t>(r)].zone] += stage.replica_tp(r);
  }
  return used;
}

std::optional<std::string> gpu_count_violation(const SearchConstraints& constraints, int gpus) {
  if (constraints.max_gpus && gpus > *constraints.max_gpus)
    return "uses " + std::to_string(gpus) + " GPUs > at most " + std::to_string(*constraints.max_gpus);
  if (constraints.min_gpus && gpus < *constraints.min_gpus)
    return "uses " + std::to_string(gpus) + " GPUs < at least " + std::to_string(*constraints.min_gpus);
  return std::nullopt;
}

std::optional<Violation> violation(const SearchRequest& request, const Plan& plan,
                                   const Evaluation& evaluation) {
  if (evaluation.infeasible) {
    const bool oom = evaluation.infeasible->kind == InfeasibleKind::kOutOfMemory;
    return Violation{oom ? "oom" : "invalid", evaluation.infeasible->message};
  }
  const SearchConstraints& c = request.constraints;
  for (const auto& [type, used] : gpus_per_type(plan)) {
    if (auto cap = c.max_gpus_per_type.find(type); cap != c.max_gpus_per_type.end() &&
                                                   used > cap->second)
      return Violation{"over-quota", "uses " + std::to_string(used) + " " + type + " > quota " +
                                         std::to_string(cap->second)};
  }
  for (const auto& [zone, used] : gpus_per_zone(plan)) {
    if (auto cap = c.max_gpus_per_zone.find(zone); cap != c.max_gpus_per_zone.end() &&
                                                   used > cap->second)
      return Violation{"over-quota", "uses " + std::to_string(used) + " GPUs in zone " + zone +
                                         " > quota " + std::to_string(cap->second)};
  }
  if (auto why = gpu_count_violation(c, plan.num_gpus())) return Violation{"gpu-count", *why};
  if (c.max_usd_per_iteration && evaluation.usd_per_iteration > *c.max_usd_per_iteration)
    return Violation{"over-budget", "over budget: " + fixed_digits(evaluation.usd_per_iteration, 4) +
                                        " USD/iter > " + fixed_digits(*c.max_usd_per_iteration, 4)};
  if (c.min_tokens_per_second && evaluation.tokens_per_second < *c.min_tokens_per_second)
    return Violation{"below-min-throughput",
                     "below minimum throughput: " + fixed_digits(evaluation.tokens_per_second, 0) +
                         " tokens/s < " + fixed_digits(*c.min_tokens_per_second, 0)};
  return std::nullopt;
}

std::string describe_plan(const Plan& plan) {
  std::string text = "mbs " + std::to_string(plan.micro_batch_size) + ", D " +
                     std::to_string(plan.dp()) + ", " + std::to_string(plan.num_stages()) +
                     (plan.num_stages() == 1 ? " stage: " : " stages: ");
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    if (s > 0) text += " | ";
    // One type and TP: "A100-40 TP2 x3b"; mixed replicas: "A100-40 TP2 x3 + V100-16 TP4 x1 x3b".
    std::vector<std::pair<std::pair<std::string, int>, int>> kinds;
    for (int r = 0; r < stage.dp(); ++r) {
      const std::pair<std::string, int> k{stage.replicas[static_cast<std::size_t>(r)].gpu_type, stage.replica_tp(r)};
      if (!kinds.empty() && kinds.back().first == k) ++kinds.back().second;
      else kinds.push_back({k, 1});
    }
    if (kinds.empty()) text += "?";
    for (std::size_t k = 0; k < kinds.size(); ++k) {
      if (k > 0) text += " + ";
      text += kinds[k].first.first + " TP" + std::to_string(kinds[k].first.second);
      if (kinds.size() > 1) text += " x" + std::to_string(kinds[k].second);
    }
    text += " x" + std::to_string(stage.num_blocks()) + "b";
  }
  return text;
}

}  // namespace flotilla::planner
