// The plan space that search.h and exhaustive.h both walk, and the checks both apply.
//
// Guarantees: merged_pools() applies H6 (zones of one region form one pool) and clamps each
//   zone by its quota; stage_configs() lists (pool, TP) pairs allowed by H1 (TP within the
//   pool's largest node, dividing the head count) that D replicas can fill;
//   materialize_plan() turns per-stage choices into a Plan whose replicas name real zones, or
//   says why it cannot; violation() is the one place that decides whether an evaluated plan
//   breaks a constraint. Search and oracle therefore agree on what is allowed.
// Assumes: pools come from gpu_pools() (one entry per GPU type and zone).
// Caveats: a stage's replicas are spread over its region's zones largest-first; a TP group
//   never spans zones.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "planner/search.h"

namespace flotilla::planner {

struct SearchPool {
  std::string gpu_type;
  const GpuType* gpu = nullptr;
  std::string region;
  std::vector<std::pair<std::string, int>> zones;  // zone -> free GPUs, largest first
  int gpus = 0;
  int max_tp = 1;  // largest node in the pool (H1)
  // Mixed pools only (mixed_pool_sets()): the GPU type of each `zones` entry. Empty: all
  // entries are gpu_type.
  std::vector<std::string> zone_gpu_types;
  // Pools grouped across regions (group_pools_across_regions()): each `zones` entry's region,
  // as an index into `regions`, and each region's GPUs. Empty: the pool is one region.
  std::vector<int> zone_region;
  std::vector<std::string> regions;
  std::vector<int> region_gpus;
};

struct StageConfig {
  int pool = 0;
  int tp = 1;
};

struct StageChoice {
  int first_block = 0;
  int last_block = 0;
  int config = 0;  // index into the configs list
};

std::vector<SearchPool> merged_pools(const SearchRequest& request, const GpuCatalog& catalog);

// Issue 13 item 4: pools that are the same for the time and memory models (same GPU type and
// largest node, one type in every zone) collapse across regions into one pool, so the stage
// DP's usage vector has one entry per GPU type, not per (type, region): 5 instead of 15 on the
// 14,336-GPU scenario. H5 still holds: materialize_plan() puts each stage's D replicas in one
// region (assign_regions()). The DP's capacity for a grouped pool is the sum
// over its regions of what each holds, per TP level (stage_units()), so every candidate places
// (it passes regions_hold(); the search relies on that and does not re-check) and no split that
// places is refused.
std::vector<SearchPool> group_pools_across_regions(const SearchRequest& request, const std::vector<SearchPool>& pools);

// GPUs of the pool's largest region (all of them for a one-region pool): D x TP must fit there.
int largest_region_gpus(const SearchPool& pool);
// TP units (GPUs / D) the pool's regions hold in whole groups of `tp` units (one-region pools:
// gpus / D). Stages of TP >= s on a grouped pool can each sit in one region iff their units
// stay within stage_units(pool, dp, s) for every s (power-of-two TP degrees: place the largest
// first; every region's free units stay a multiple of the next size). The stage DP tracks one
// usage entry per such binding level, so the grouping is exact.
int stage_units(const SearchPool& pool, int dp, int tp);

// Issue 13: the pool lists that let one stage's DP replicas mix two GPU types. For every pair of
// pools of different GPU types in one region, the other pools unchanged plus one pool holding
// both: its replicas are filled from the faster type's zones first, then the slower's (a TP
// group never spans types or zones). The DP sees it as the slower type (its profile, so a stage
// is never predicted faster than its slowest replica) with the smaller memory, the larger
// runtime overhead and the higher price, so whatever it keeps fits every replica's GPU; every
// kept candidate is then scored by evaluate() on the real mix. `storage` owns those synthetic
// GPU entries (pointers stay valid while it lives).
std::vector<std::vector<SearchPool>> mixed_pool_sets(const std::vector<SearchPool>& pools,
                                                     const ModelSpec& model, const ComputeModel& compute,
                                                     std::deque<GpuType>& storage);

std::vector<StageConfig> stage_configs(const SearchRequest& request,
                                       const std::vector<SearchPool>& pools, int dp);

// Micro-batch sizes and DP degrees that keep the global batch exact, ascending.
std::vector<int> micro_batch_sizes(const SearchRequest& request);
std::vector<int> dp_degrees(const SearchRequest& request, int micro_batch_size, int max_gpus);

// How stages that share a multi-zone pool take its zones. kPipelineOrder: in pipeline order,
// each stage in the first zone with room. kLastBesideFirst: the last stage is placed right
// after stage 0, preferring stage 0's zone, so a tied model's embedding all-reduce between
// them (time_model.h) can stay within a zone; the stages between come after. Which one is
// faster depends on the model (one all-reduce per iteration against two p2p per micro-batch),
// so the search and the oracle evaluate both (tied_placement_differs() says when it matters).
enum class Placement { kPipelineOrder, kLastBesideFirst };

// "" and fills `plan`, or one line why the choices cannot be placed on the pools' zones.
std::string materialize_plan(const SearchRequest& request, const std::vector<SearchPool>& pools,
                             const std::vector<StageConfig>& configs,
                             const std::vector<StageChoice>& choices, int micro_batch_size,
                             int dp, Plan& plan, Placement placement = Placement::kPipelineOrder);

// Whether kLastBesideFirst can give another plan than kPipelineOrder: a tied model, more than
// one stage, and the last stage's pool has more than one zone.
bool tied_placement_differs(const SearchRequest& request, const std::vector<SearchPool>& pools,
                            const std::vector<StageConfig>& configs, const std::vector<StageChoice>& choices);

// Whether the stages' replicas fit their pools' regions, each stage in one region (only pools
// grouped across regions can fail it; exact for power-of-two TP degrees). The stage DP's usage
// dimensions per TP level enforce the same condition, so the search does not call it; the tests
// hold the DP's candidates to it.
bool regions_hold(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                  const std::vector<StageChoice>& choices, int dp);

// Per stage, its region as an index into its pool's `regions` (0 for one-region pools), each
// stage's D replicas in one region: pipeline order first, each stage in a placed neighbour's
// region when that has room (no cross-region p2p), else the first with room; if that fails,
// largest TP first (fits whenever regions_hold() does). Empty: no assignment fits.
// materialize_plan() and the proxy (stage_first_zones()) both use it. kLastBesideFirst places
// the last stage right after stage 0 and in stage 0's region when that has room.
std::vector<int> assign_regions(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                                const std::vector<StageChoice>& choices, int dp,
                                Placement placement = Placement::kPipelineOrder);

// Per stage, the index (into its pool's zones) of the first zone materialize_plan() would put its
// replicas in, by region only (0 for one-region pools): the proxy's view of where a stage runs.
std::vector<std::size_t> stage_first_zones(const std::vector<SearchPool>& pools, const std::vector<StageConfig>& configs,
                                           const std::vector<StageChoice>& choices, int dp);

// GPUs a plan takes, per GPU type and per zone.
std::map<std::string, int> gpus_per_type(const Plan& plan);
std::map<std::string, int> gpus_per_zone(const Plan& plan);

struct Violation {
  std::string kind;  // "oom", "over-budget", "below-min-throughput", "over-quota", "gpu-count",
                     // "invalid"
  std::string why;   // one line
};

// One line when `gpus` (a whole plan's GPUs) is outside [min_gpus, max_gpus].
std::optional<std::string> gpu_count_violation(const SearchConstraints& constraints, int gpus);

// Nothing when the evaluated plan is feasible and within every constraint.
std::optional<Violation> violation(const SearchRequest& request, const Plan& plan,
                                   const Evaluation& evaluation);

// `value` with `digits` decimals, for the one-line reasons.
std::string fixed_digits(double value, int digits);

// "mbs 2, D 16, 4 stages: A100-40 TP2 x3 | V100-16 TP4" (one line).
std::string describe_plan(const Plan& plan);
// describe_plan() plus every stage's replica zones: two plans of the same shapes placed in
// different zones (Placement) are different plans.
std::string plan_signature(const Plan& plan);

}  // namespace flotilla::planner
