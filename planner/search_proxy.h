// Fast iteration-time estimate of a search candidate, for ranking before evaluate().
//
// Guarantees: for a plan whose stages each sit in one zone, estimate() equals evaluate()'s
//   iter_seconds (tests/planner/search_proxy_test.cpp holds it to 1e-9 relative): it composes
//   the same time model — per-block forward/backward/update from stage_timing(), p2p from
//   stage_timing(), DP sync as stage_timing() computes it, pipeline_iter_seconds() — but from
//   cached per-(pool, TP) prefix sums, so one estimate costs O(stages), not O(blocks) lookups.
//   cycle_prefix() and p2p_cycle() are the same numbers the stage DP minimises over.
// Assumes: one micro-batch size per ProxyTimer; pools from merged_pools().
// Caveats: replicas spread over several zones, and cross-zone traffic dollars, are only
//   approximated (first zone of each pool); evaluate() stays the judge of every returned plan.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "planner/region_assigner.h"
#include "planner/search_space.h"
#include "planner/stage_dp.h"

namespace flotilla::planner {

class ProxyTimer {
 public:
  ProxyTimer(const SearchRequest& request, const EvalContext& context,
             const std::vector<SearchPool>& pools, int micro_batch_size);
  ProxyTimer(const ProxyTimer&) = delete;  // its table index points into its own tables
  ProxyTimer& operator=(const ProxyTimer&) = delete;

  struct Estimate {
    double iter_seconds = 0;
    double usd_per_iteration = 0;  // compute only
  };
  Estimate estimate(const std::vector<StageChoice>& choices, const std::vector<StageConfig>& configs,
                    int dp, int num_micro_batches);

  // Prefix sums over blocks of forward + backward seconds (recompute included) of one
  // micro-batch, and 2 x p2p seconds over an inter-node link, for a (pool, TP) pair.
  const std::vector<double>& cycle_prefix(const StageConfig& config);
  // `dp` replicas of the stage send at once (p2p_senders_per_node()).
  double p2p_cycle(const StageConfig& config, int dp);

 private:
  struct Table {
    Table() = default;
    // p2p_at_dp points into this Table's own p2p_s: a copy would point into the original's.
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;
    Table(Table&&) = default;
    Table& operator=(Table&&) = default;
    std::vector<double> forward, backward, update, cycle;  // prefix sums, blocks + 1
    std::map<int, std::array<double, 4>> p2p_s;           // by D, then LinkKind, lazily
    int p2p_dp = -1;                                      // the D last asked, and its entry
    std::array<double, 4>* p2p_at_dp = nullptr;
    // dp_sync_seconds() by (LinkKind, first, last) for D = sync_dp, lazily (-1: not yet); the
    // search asks for one D at a time. Models of at most kDenseSyncBlocks blocks only.
    int sync_dp = -1;
    std::vector<double> sync_s;
  };
  Table& table(const StageConfig& config);
  Table& build_table(const StageConfig& config);  // found or built in tables_
  double p2p_seconds(const StageConfig& config, LinkKind link, int dp);
  // With the config's table already looked up (estimate() asks for every stage of every candidate).
  double p2p_seconds(Table& t, const StageConfig& config, LinkKind link, int dp);
  double dp_sync_seconds(Table& t, const StageConfig& config, int first, int last, int dp, LinkKind link);

  // link_between() of two pools' zones, by their index in zone_base_ order (memoized: estimate()
  // asks for every stage boundary of every candidate, and the network compares zone names).
  LinkKind link_between_zones(int pool_a, std::size_t zone_a, int pool_b, std::size_t zone_b);

  double tied_sync_seconds(const StageConfig& first, std::size_t first_zone, const StageConfig& last,
                           std::size_t last_zone, int num_stages, int dp);

  const SearchRequest& request_;
  const EvalContext& context_;
  const std::vector<SearchPool>& pools_;
  int mbs_ = 1;
  int blocks_ = 0;
  std::unordered_map<std::uint64_t, Table> tables_;  // key: pool << 32 | tp
  static constexpr int kDirectTp = 64;
  std::vector<Table*> table_index_;  // pool x (kDirectTp + 1) + tp -> its entry in tables_
  // Every field in full: a packed 64-bit key collided once models had more than 255 blocks.
  struct SyncKey {
    int pool, tp, first, last, dp, link;
    bool operator==(const SyncKey&) const = default;
  };
  struct SyncKeyHash {
    std::size_t operator()(const SyncKey& k) const {
      std::uint64_t h = 1469598103934665603ull;
      for (int v : {k.pool, k.tp, k.first, k.last, k.dp, k.link})
        h = (h ^ static_cast<std::uint32_t>(v)) * 1099511628211ull;
      return static_cast<std::size_t>(h);
    }
  };
  std::unordered_map<SyncKey, double, SyncKeyHash> sync_;
  // The tied-embedding all-reduce per (first pool, TP, zone; last pool, TP, zone; D); a handful per search.
  struct TiedKey {
    int first_pool, first_tp, first_zone, last_pool, last_tp, last_zone, dp;
    auto operator<=>(const TiedKey&) const = default;
  };
  std::map<TiedKey, double> tied_;
  static constexpr int kDenseSyncBlocks = 160;  // 4 x 161^2 doubles per table at most (~0.8 MB)
  std::vector<int> zone_base_;  // per pool: its first zone's index among all pools' zones
  int zones_ = 0;
  std::vector<signed char> links_;  // zones_ x zones_ LinkKind, -1: not asked yet
  std::vector<StageTiming> timings_;  // estimate()'s per-stage timings
  // estimate()'s regions, for the configs and D it was last asked (the search asks one (mbs, D)
  // run's candidates in a row), and its per-stage first zones.
  std::optional<RegionAssigner> assigner_;
  std::vector<std::size_t> first_zone_;
};

// The stage DP's time tables for one (mbs, D), per stage config: the proxy's cycle prefix sums
// and p2p cycle. A StageDpInput points into them, so they must outlive the solver.
struct StageDpTimes {
  std::vector<std::vector<double>> prefix;
  std::vector<double> p2p_cycle;
};
StageDpTimes stage_dp_times(ProxyTimer& timer, const std::vector<StageConfig>& configs, int dp);

// The stage DP's input for one (mbs, D) as the search builds it (no bound, exact DP, no beam):
// it points into `request`, `context`, `pools`, `configs` and `times`.
StageDpInput stage_dp_input(const SearchRequest& request, const EvalContext& context,
                            const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                            const StageDpTimes& times, int micro_batch_size, int dp, int max_stages);

}  // namespace flotilla::planner
