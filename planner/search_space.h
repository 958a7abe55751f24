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

// "" and fills `plan`, or one line why the choices cannot be placed on the pools' zones.
std::string materialize_plan(const SearchRequest& request, const std::vector<SearchPool>& pools,
                             const std::vector<StageConfig>& configs,
                             const std::vector<StageChoice>& choices, int micro_batch_size,
                             int dp, Plan& plan);

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

}  // namespace flotilla::planner
