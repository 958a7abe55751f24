#include "planner/search_proxy.h"

#include <algorithm>

#include "planner/memory_model.h"
#include "planner/time_model.h"

namespace flotilla::planner {
namespace {
// Whether the zone after `z` (where D replicas spill over) is in z's region; a pool grouped
// across regions lists the next region's zones after the first region's.
bool next_zone_in_region(const SearchPool& pool, std::size_t z) {
  return z + 1 < pool.zones.size() && (pool.zone_region.empty() || pool.zone_region[z + 1] == pool.zone_region[z]);
}
}  // namespace

ProxyTimer::ProxyTimer(const SearchRequest& request, const EvalContext& context,
                       const std::vector<SearchPool>& pools, int micro_batch_size)
    : request_(request), context_(context), pools_(pools), mbs_(micro_batch_size) {
  blocks_ = request.model.num_blocks();
  for (const SearchPool& pool : pools) {
    zone_base_.push_back(zones_);
    zones_ += static_cast<int>(pool.zones.size());
  }
  links_.assign(static_cast<std::size_t>(zones_) * zones_, -1);
}

LinkKind ProxyTimer::link_between_zones(int pool_a, std::size_t zone_a, int pool_b, std::size_t zone_b) {
  const std::size_t a = static_cast<std::size_t>(zone_base_[pool_a]) + zone_a;
  const std::size_t b = static_cast<std::size_t>(zone_base_[pool_b]) + zone_b;
  signed char& cached = links_[a * zones_ + b];
  if (cached < 0)
    cached = static_cast<signed char>(
        context_.network->link_between(pools_[pool_a].zones[zone_a].first, pools_[pool_b].zones[zone_b].first, false));
  return static_cast<LinkKind>(cached);
}

ProxyTimer::Table& ProxyTimer::table(const StageConfig& config) {
  // estimate() asks for every stage of every candidate: a direct index before the map.
  const std::size_t direct = static_cast<std::size_t>(config.pool) * (kDirectTp + 1) + static_cast<std::size_t>(config.tp);
  const bool indexed = config.pool >= 0 && config.tp >= 0 && config.tp <= kDirectTp;
  if (indexed && direct < table_index_.size() && table_index_[direct] != nullptr) return *table_index_[direct];
  Table& t = build_table(config);
  if (indexed) {
    if (direct >= table_index_.size()) table_index_.resize(direct + 1, nullptr);
    table_index_[direct] = &t;  // unordered_map nodes do not move
  }
  return t;
}

ProxyTimer::Table& ProxyTimer::build_table(const StageConfig& config) {
  const std::uint64_t key = (static_cast<std::uint64_t>(config.pool) << 32) | static_cast<std::uint32_t>(config.tp);
  auto found = tables_.find(key);
  if (found != tables_.end()) return found->second;
  Table t;
  t.forward.assign(blocks_ + 1, 0.0);
  t.backward.assign(blocks_ + 1, 0.0);
  t.update.assign(blocks_ + 1, 0.0);
  t.cycle.assign(blocks_ + 1, 0.0);
  const SearchPool& pool = pools_[config.pool];
  const std::vector<const GpuType*> one = {pool.gpu};
  Stage stage;
  stage.tp = config.tp;
  stage.replicas = {Replica{pool.gpu_type, pool.zones.front().first, 0}};
  for (int b = 0; b < blocks_; ++b) {
    stage.first_block = b;
    stage.last_block = b + 1;
    // Per block through stage_timing() itself, so recompute and profile handling match.
    const StageTiming s = stage_timing(request_.model, stage, one, mbs_, request_.training,
                                       *context_.compute, *context_.network, LinkKind::kInterNode,
                                       LinkKind::kInterNode);
    t.forward[b + 1] = t.forward[b] + s.forward_s;
    t.backward[b + 1] = t.backward[b] + s.backward_s;
    t.update[b + 1] = t.update[b] + s.update_s;
    t.cycle[b + 1] = t.forward[b + 1] + t.backward[b + 1];
  }
  return tables_.emplace(key, std::move(t)).first->second;
}

double ProxyTimer::p2p_seconds(const StageConfig& config, LinkKind link, int dp) {
  return p2p_seconds(table(config), config, link, dp);
}

double ProxyTimer::p2p_seconds(Table& t, const StageConfig& config, LinkKind link, int dp) {
  if (t.p2p_dp != dp) {  // the search asks one D at a time: no map look-up per stage
    auto [it, added] = t.p2p_s.try_emplace(dp);
    if (added) it->second.fill(-1);
    t.p2p_dp = dp;
    t.p2p_at_dp = &it->second;  // std::map nodes do not move
  }
  double& cached = (*t.p2p_at_dp)[static_cast<int>(link)];
  if (cached < 0) {
    const SearchPool& pool = pools_[config.pool];
    Stage stage;
    stage.tp = config.tp;
    stage.first_block = 1;  // any block but the head sends activations on
    stage.last_block = 2;
    stage.replicas.assign(static_cast<std::size_t>(std::max(1, dp)), Replica{pool.gpu_type, pool.zones.front().first, 0});
    cached = stage_timing(request_.model, stage, {pool.gpu}, mbs_, request_.training,
                          *context_.compute, *context_.network, link, LinkKind::kInterNode)
                 .p2p_s;
  }
  return cached;
}

const std::vector<double>& ProxyTimer::cycle_prefix(const StageConfig& config) {
  return table(config).cycle;
}

double ProxyTimer::p2p_cycle(const StageConfig& config, int dp) {
  return 2.0 * p2p_seconds(config, LinkKind::kInterNode, dp);
}

double ProxyTimer::dp_sync_seconds(Table& t, const StageConfig& config, int first, int last, int dp,
                                   LinkKind link) {
  if (dp <= 1) return 0.0;
  double* dense = nullptr;
  if (blocks_ <= kDenseSyncBlocks) {
    const std::size_t span = static_cast<std::size_t>(blocks_) + 1;
    if (t.sync_dp != dp) {
      t.sync_dp = dp;
      t.sync_s.assign(4 * span * span, -1.0);
    }
    dense = &t.sync_s[(static_cast<std::size_t>(link) * span + static_cast<std::size_t>(first)) * span +
                      static_cast<std::size_t>(last)];
    if (*dense >= 0) return *dense;
  }
  const SyncKey key{config.pool, config.tp, first, last, dp, static_cast<int>(link)};
  if (dense == nullptr) {
    auto found = sync_.find(key);
    if (found != sync_.end()) return found->second;
  }
  // As time_model.cpp: fp32 main grads of the stage's rank, ring all-reduce over the replicas.
  const GpuType& gpu = *pools_[config.pool].gpu;
  const int gpus_per_node = std::max(1, std::min(config.tp, gpu.gpus_per_node));
  const double grad_bytes =
      4.0 * static_cast<double>(stage_params_per_rank(request_.model, first, last, config.tp));
  const double seconds = context_.network->allreduce_seconds(grad_bytes, dp, link, gpu, gpus_per_node);
  if (dense != nullptr) *dense = seconds;
  else sync_.emplace(key, seconds);
  return seconds;
}

double ProxyTimer::tied_sync_seconds(const StageConfig& first, std::size_t first_zone, const StageConfig& last,
                                     std::size_t last_zone, int num_stages, int dp) {
  const TiedKey key{first.pool, first.tp, static_cast<int>(first_zone), last.pool, last.tp, static_cast<int>(last_zone),
                    dp};
  auto found = tied_.find(key);
  if (found != tied_.end()) return found->second;
  // As evaluate(): stage 0's D replicas send at once, the smaller TP sets the shard.
  const SearchPool& a = pools_[first.pool];
  const SearchPool& b = pools_[last.pool];
  const double seconds = tied_embedding_sync_seconds(request_.model, *context_.network, num_stages,
                                                     std::min(first.tp, last.tp), a.zones[first_zone].first, *a.gpu,
                                                     b.zones[last_zone].first, *b.gpu,
                                                     p2p_senders_per_node(first.tp, dp, a.gpu->gpus_per_node));
  tied_.emplace(key, seconds);
  return seconds;
}

ProxyTimer::Estimate ProxyTimer::estimate(const std::vector<StageChoice>& choices,
                                          const std::vector<StageConfig>& configs, int dp,
                                          int num_micro_batches) {
  std::vector<StageTiming>& timings = timings_;  // reused: estimate() runs per DP candidate
  timings.assign(choices.size(), StageTiming{});
  if (!assigner_ || !assigner_->serves(configs, dp)) assigner_.emplace(pools_, configs, dp);
  std::vector<std::size_t>& first_zone = first_zone_;  // as stage_first_zones(), without its allocations
  assigner_->first_zones(choices, first_zone);
  double usd_per_second = 0;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const StageChoice& choice = choices[i];
    const StageConfig& config = configs[choice.config];
    const SearchPool& pool = pools_[config.pool];
    const std::size_t z = first_zone[i];
    Table& t = table(config);  // once per stage: p2p and all-reduce look-ups take it
    StageTiming& timing = timings[i];
    timing.forward_s = t.forward[choice.last_block] - t.forward[choice.first_block];
    timing.backward_s = t.backward[choice.last_block] - t.backward[choice.first_block];
    timing.update_s = t.update[choice.last_block] - t.update[choice.first_block];
    if (i + 1 < choices.size()) {
      const int next = configs[choices[i + 1].config].pool;
      const LinkKind link = std::max(LinkKind::kInterNode, link_between_zones(config.pool, z, next, first_zone[i + 1]));
      timing.p2p_s = p2p_seconds(t, config, link, dp);
    }
    // As evaluate() composes it: intra-node when all replicas fit one node of one zone, else
    // the link between neighbouring replicas' zones.
    const bool one_zone = config.tp * dp <= pool.zones[z].second;
    LinkKind dp_link = LinkKind::kInterNode;
    if (dp > 1 && one_zone && config.tp * dp <= pool.gpu->gpus_per_node) dp_link = LinkKind::kIntraNode;
    if (dp > 1 && dp_link != LinkKind::kIntraNode)
      dp_link = std::max(dp_link, link_between_zones(config.pool, z, config.pool,
                                                     one_zone || !next_zone_in_region(pool, z) ? z : z + 1));
    timing.dp_sync_s = dp_sync_seconds(t, config, choice.first_block, choice.last_block, dp, dp_link);
    usd_per_second += pool.gpu->usd_per_hour / 3600.0 * config.tp * dp;
  }
  if (choices.size() > 1) {
    const double tied = tied_sync_seconds(configs[choices.front().config], first_zone.front(),
                                          configs[choices.back().config], first_zone.back(), static_cast<int>(choices.size()),
                                          dp);
    timings.front().tied_sync_s = tied;
    timings.back().tied_sync_s = tied;
  }
  Estimate e;
  e.iter_seconds = pipeline_iter_seconds(timings, num_micro_batches).iter_seconds;
  e.usd_per_iteration = usd_per_second * e.iter_seconds;
  return e;
}

StageDpTimes stage_dp_times(ProxyTimer& timer, const std::vector<StageConfig>& configs, int dp) {
  StageDpTimes times;
  for (const StageConfig& config : configs) {
    times.prefix.push_back(timer.cycle_prefix(config));
    times.p2p_cycle.push_back(timer.p2p_cycle(config, dp));
  }
  return times;
}

StageDpInput stage_dp_input(const SearchRequest& request, const EvalContext& context,
                            const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                            const StageDpTimes& times, int micro_batch_size, int dp, int max_stages) {
  StageDpInput input;
  input.model = &request.model;
  input.training = &request.training;
  input.pools = &pools;
  input.configs = &configs;
  input.time_prefix = &times.prefix;
  input.p2p_cycle_seconds = &times.p2p_cycle;
  input.memory_constants = &context.memory_constants;
  input.micro_batch_size = micro_batch_size;
  input.dp = dp;
  input.num_micro_batches = request.global_batch_size / (micro_batch_size * dp);
  input.max_stages = max_stages;
  return input;
}

}  // namespace flotilla::planner
