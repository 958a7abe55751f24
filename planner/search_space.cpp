#include "planner/search_space.h"

#include "planner/region_assigner.h"

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

std::vector<SearchPool> group_pools_across_regions(const SearchRequest& request, const std::vector<SearchPool>& pools) {
  std::vector<SearchPool> grouped;
  std::map<std::pair<const GpuType*, int>, std::size_t> by_model;  // (GPU, largest node) -> grouped index
  for (const SearchPool& pool : pools) {
    const bool groupable = pool.zone_gpu_types.empty() && pool.zone_region.empty();
    auto found = groupable ? by_model.find({pool.gpu, pool.max_tp}) : by_model.end();
    if (found == by_model.end()) {
      if (groupable) by_model[{pool.gpu, pool.max_tp}] = grouped.size();
      grouped.push_back(pool);
      continue;
    }
    SearchPool& into = grouped[found->second];
    if (into.zone_region.empty()) {  // becomes a group: record its first region
      into.zone_region.assign(into.zones.size(), 0);
      into.regions = {into.region};
      into.region_gpus = {into.gpus};
    }
    const int region = static_cast<int>(into.regions.size());
    into.regions.push_back(pool.region);
    into.region_gpus.push_back(pool.gpus);
    into.region += "+" + pool.region;
    for (const auto& zone : pool.zones) {
      into.zones.push_back(zone);
      into.zone_region.push_back(region);
    }
    into.gpus += pool.gpus;
  }
  for (SearchPool& pool : grouped) {
    if (auto cap = request.constraints.max_gpus_per_type.find(pool.gpu_type);
        cap != request.constraints.max_gpus_per_type.end())
      pool.gpus = std::min(pool.gpus, cap->second);
  }
  return grouped;
}

int largest_region_gpus(const SearchPool& pool) {
  if (pool.region_gpus.empty()) return pool.gpus;
  return std::min(pool.gpus, *std::max_element(pool.region_gpus.begin(), pool.region_gpus.end()));
}

int stage_units(const SearchPool& pool, int dp, int tp) {
  if (pool.region_gpus.empty()) return pool.gpus / dp;
  int units = 0;
  for (int gpus : pool.region_gpus) units += (gpus / dp) / tp * tp;
  return std::min(units, pool.gpus / dp);
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
      worst.cuda_context_bytes = std::max(a.gpu->cuda_context_bytes, b.gpu->cuda_context_bytes);
      worst.cublas_workspace_bytes = std::max(a.gpu->cublas_workspace_bytes, b.gpu->cublas_workspace_bytes);
      worst.nccl_channels = std::max(a.gpu->nccl_channels, b.gpu->nccl_channels);
      worst.nccl_ll128 = a.gpu->nccl_ll128 || b.gpu->nccl_ll128;
      worst.emulated = a.gpu->emulated && b.gpu->emulated;
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
      if (static_cast<long long>(tp) * dp > largest_region_gpus(pools[k])) continue;
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

std::vector<int> assign_regions(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                                const std::vector<StageChoice>& choices, int dp, Placement placement) {
  std::vector<int> region;
  RegionAssigner(pools, configs, dp).assign(choices, placement, region);
  return region;
}

std::vector<std::size_t> stage_first_zones(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                                           const std::vector<StageChoice>& choices, int dp) {
  std::vector<std::size_t> first;
  RegionAssigner(pools, configs, dp).first_zones(choices, first);
  return first;
}

namespace {
// The replicas of one stage: D TP groups, each in the first zone (of `region`, when the pool is
// grouped across regions) with room; false, and `left` untouched, when they do not fit.
// `preferred_zone` (may be empty) is tried before the pool's own zone order.
bool place_replicas(const SearchPool& pool, int region, int tp, int dp, std::vector<int>& left,
                    std::vector<Replica>& replicas, std::string_view preferred_zone = {}) {
  std::vector<std::size_t> order;
  for (std::size_t z = 0; z < pool.zones.size(); ++z)
    if (pool.zones[z].first == preferred_zone) order.push_back(z);
  for (std::size_t z = 0; z < pool.zones.size(); ++z)
    if (pool.zones[z].first != preferred_zone) order.push_back(z);
  std::vector<int> trial = left;
  replicas.clear();
  std::size_t k = 0;
  for (int d = 0; d < dp; ++d) {
    while (k < order.size() &&
           (trial[order[k]] < tp || (!pool.zone_region.empty() && pool.zone_region[order[k]] != region)))
      ++k;
    if (k == order.size()) return false;
    const std::size_t z = order[k];
    trial[z] -= tp;
    replicas.push_back({pool.zone_gpu_types.empty() ? pool.gpu_type : pool.zone_gpu_types[z], pool.zones[z].first, 0});
  }
  left = std::move(trial);
  return true;
}
}  // namespace

std::string materialize_plan(const SearchRequest& request, const std::vector<SearchPool>& pools,
                             const std::vector<StageConfig>& configs,
                             const std::vector<StageChoice>& choices, int micro_batch_size,
                             int dp, Plan& plan, Placement placement) {
  plan = Plan{};
  plan.micro_batch_size = micro_batch_size;
  plan.global_batch_size = request.global_batch_size;
  plan.options = request.training;
  std::vector<std::vector<int>> zone_left(pools.size());
  for (std::size_t k = 0; k < pools.size(); ++k) {
    for (const auto& [zone, gpus] : pools[k].zones) zone_left[k].push_back(gpus);
  }
  // H5: each stage's D replicas in one region (assign_regions()); one-region pools: their own.
  const std::vector<int> region = assign_regions(pools, configs, choices, dp, placement);
  const std::size_t n = choices.size();
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  if (placement == Placement::kLastBesideFirst && n > 2) std::rotate(order.begin() + 1, order.end() - 1, order.end());
  plan.stages.assign(n, Stage{});
  for (std::size_t i : order) {
    const StageConfig& config = configs[choices[i].config];
    const SearchPool& pool = pools[config.pool];
    Stage& stage = plan.stages[i];
    stage.first_block = choices[i].first_block;
    stage.last_block = choices[i].last_block;
    stage.tp = config.tp;
    const bool beside_first = placement == Placement::kLastBesideFirst && i + 1 == n && n > 1;
    const std::string_view preferred = beside_first ? std::string_view(plan.stages[0].replicas.front().zone) : "";
    if (region.empty() ||
        !place_replicas(pool, region[i], config.tp, dp, zone_left[config.pool], stage.replicas, preferred)) {
      std::erase_if(plan.stages, [](const Stage& placed) { return placed.replicas.empty(); });
      return "not enough " + pool.gpu_type + " in " + (pool.regions.empty() ? "" : "any one region of ") +
             pool.region + " for TP " + std::to_string(config.tp) + " x " + std::to_string(dp) + " replicas";
    }
  }
  return "";
}

bool tied_placement_differs(const SearchRequest& request, const std::vector<SearchPool>& pools,
                            const std::vector<StageConfig>& configs, const std::vector<StageChoice>& choices) {
  return request.model.tied_embeddings && choices.size() > 1 &&
         pools[configs[choices.back().config].pool].zones.size() > 1;
}

bool regions_hold(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                  const std::vector<StageChoice>& choices, int dp) {
  for (int k = 0; k < static_cast<int>(pools.size()); ++k) {
    const SearchPool& pool = pools[k];
    if (pool.region_gpus.empty()) continue;
    // TP units of the stages on this pool with TP >= s, against what the regions hold in whole
    // groups of s units: necessary, and sufficient for power-of-two TP degrees (placing the
    // largest first, every region's free units stay a multiple of the next size).
    for (int s = 1; s <= 64; s *= 2) {
      int used = 0;
      for (const StageChoice& choice : choices) {
        const StageConfig& config = configs[choice.config];
        if (config.pool == k && config.tp >= s) used += config.tp;
      }
      if (used == 0) break;
      int held = 0;
      for (int gpus : pool.region_gpus) held += (gpus / dp) / s * s;
      if (used > held) return false;
    }
  }
  return true;
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

std::string plan_signature(const Plan& plan) {
  std::string text = describe_plan(plan) + " @";
  for (const Stage& stage : plan.stages) {
    text += " |";
    for (const Replica& replica : stage.replicas) text += " " + replica.zone;
  }
  return text;
}

}  // namespace flotilla::planner
