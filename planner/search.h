// Plan search: resources and a parallel plan together (Sailor §4.2), over GPUs free right now.
//
// Guarantees: search_plans() returns plans ranked by the objective (best first), each with its
//   full evaluate() report; no returned plan is predicted to OOM, and every returned plan
//   respects the request's constraints (budget per iteration, minimum tokens/s, GPUs per type,
//   per zone, per pool). It also returns the alternatives it rejected, one line each with the
//   reason (OOM, over budget, below minimum throughput, not enough GPUs, pruned by H3/H4).
//   It is pure and deterministic (no I/O, no clock, no threads).
// Assumes: the plan space (shared with exhaustive.h, see search_space.h): a common micro-batch
//   size and DP degree D (gbs divisible by mbs*D: the global batch is never changed), P
//   contiguous stages with uneven block splits, and per stage one GPU pool (type x region,
//   H5/H6) and one TP degree (a power of two within a node, H1) for all its D replicas;
//   options.uniform_tp narrows that to one TP degree for the whole plan, options.tp_degrees
//   to the degrees a worker runs, constraints.min_gpus/max_gpus to a GPU count range.
// Caveats: models of more than 126 layers are searched with layers grouped into at most 128
//   DP positions, then re-split per layer (options.max_stage_dp_positions; within 2 % of the
//   exact DP on the GPT-style models measured, 3.6 % below it on a 127-layer Llama-2-7B-wide
//   one, docs/planner.md). Grouping can hide every split that fits (a
//   small GPU that holds one layer but not a group), so when it finds no plan the search runs
//   again with twice the positions, up to kMaxRegroupPositions, before it reports failure; a
//   failure still grouped says so. Sailor lets the replicas of one stage mix GPU types; the DP keeps
//   a stage's replicas on one pool, and options.mix_types_within_stage adds passes over pools
//   that hold two types of one region (search_space.h, mixed_pool_sets()), run around the best
//   one-type plan's micro-batch size and D (and 2D) where one of the two types runs out. The DP
//   minimises the slowest stage's compute time per pipeline depth and usage; sync, p2p and
//   warm-up are then scored by evaluate() on the DP's candidates (docs/planner.md).
//   Large clusters (issue 13 item 4): pools of one GPU type in several regions are one DP pool
//   (exact: each stage still gets one region, search_space.h), and an (mbs, D) run that would
//   exceed kSeedStates exact-DP states is searched by beams instead (heuristic, as the state
//   budget's truncation was; SearchStats::beam_dp_runs counts them). Before each (mbs, D) run a
//   relaxation of the DP (StageDp::cannot_complete()) skips runs that would find nothing (exact).
//   The mixed-type passes share a memo of solved DP runs (stage_dp_memo.h): a run whose inputs
//   equal an earlier pass's takes its outcome (exact; SearchStats::dp_solves_recalled).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/evaluate.h"
#include "planner/model_spec.h"
#include "planner/plan.h"

namespace flotilla::planner {

enum class Objective { kMaxThroughput, kMinCost };

struct SearchConstraints {
  std::optional<double> max_usd_per_iteration;
  std::optional<double> min_tokens_per_second;
  std::map<std::string, int> max_gpus_per_type;  // canonical GPU name -> GPUs
  std::map<std::string, int> max_gpus_per_zone;
  // GPUs the whole plan takes (all stages and replicas); unset: no bound. Enforced on every
  // (depth, usage) candidate of the stage DP, so a bound never hides a plan that respects it.
  std::optional<int> min_gpus;
  std::optional<int> max_gpus;
};

struct SearchOptions {
  std::vector<int> micro_batch_sizes = {1, 2, 4, 8};
  std::vector<int> tp_degrees = {1, 2, 4, 8};  // {1}: the reference worker (no TP)
  // Data-parallel degrees allowed; empty: every D that divides the micro-batches. A job that
  // rescales under strict elasticity keeps its D (and micro-batch size), so only PP changes.
  std::vector<int> dp_degrees;
  // One TP degree for every stage (Megatron-LM's tensor_model_parallel_size is global): the
  // search runs once per degree in tp_degrees and merges the rankings. GPU types may still
  // differ between stages. The micro-batch size is always one for all stages (plan.h).
  bool uniform_tp = false;
  // Whether the worker can recompute activations, so suggest.h may name it as the change that
  // fits; false for workers launched without a recompute setting (the operator's kinds).
  bool suggest_recompute = true;
  int max_stages = 0;        // 0: one per block at most
  bool heuristics = true;    // false: no H2 pre-check and no H3/H4 early stop (baseline)
  bool branch_and_bound = true;  // false: the DP keeps stages slower than the best plan allows
  // The stage DP's first, O(blocks^2)-per-transition sweep instead of the O(blocks) one (same
  // result, cell for cell); for the bench's and the tests' same-run baseline only.
  bool quadratic_stage_dp = false;
  // Models with more blocks than this are searched over runs of identical layers (at most this
  // many DP positions), then each kept candidate is re-split over single layers; 0: always
  // exact. See docs/planner.md for what grouping can cost.
  int max_stage_dp_positions = 128;
  // When grouped positions find no plan, search again with twice the positions (up to
  // kMaxRegroupPositions). suggest.h turns it off: its ~20 trial searches would each repeat.
  bool regroup_when_empty = true;
  // Issue 13: also search plans whose stages mix two GPU types of one region among their DP
  // replicas (search_space.h, mixed_pool_sets()): one more stage-DP pass per such pair of
  // pools; exhaustive_search() walks the same space.
  bool mix_types_within_stage = true;
  // Issue 13 item 4: pools of one GPU type (and node size) in several regions form one pool of
  // the stage DP (search_space.h, group_pools_across_regions()); each stage still stays in one
  // region. false: one DP pool per (type, region), as before (the tests' reference).
  bool group_pools_across_regions = true;
  // Issue 13 item 4: when an (mbs, D) run is too large for the exact stage DP (it would hit its
  // state budget and keep whichever states came first), search it with beams of the most
  // promising states per depth, the first one seeding the bound (search.cpp, seed_bound()).
  // false: the exact DP, truncated at its budget, as before.
  bool beam_when_truncated = true;
  // Before each (mbs, D) run, a relaxation of the stage DP (one weighted capacity instead of
  // one per pool; StageDp::cannot_complete()) skips the runs that cannot find a pipeline that
  // fits and beats the bound. Exact: results are unchanged. false: every run is solved.
  bool prune_by_relaxation = true;
  // The mixed-type passes share a memo of solved stage-DP runs (stage_dp_memo.h): a run whose
  // inputs equal an earlier pass's (on 14,336 GPUs, the passes in us-east1 and us-west1) takes
  // its outcome instead of solving again. Exact: results are unchanged. false: every run solved.
  bool reuse_identical_dp_runs = true;
  int max_plans = 5;         // ranked plans returned
  int max_rejections = 12;   // rejection lines returned, at most 3 per kind and each reason
                             // once (rejection_counts keep all)
};

struct SearchRequest {
  ModelSpec model;
  int global_batch_size = 0;
  TrainingOptions training;
  std::vector<GpuPool> pools;
  Objective objective = Objective::kMaxThroughput;
  SearchConstraints constraints;
  SearchOptions options;
};

struct RankedPlan {
  Plan plan;
  Evaluation evaluation;
};

struct Rejection {
  std::string kind;  // as in rejection_counts
  std::string what;  // "mbs 2, D 16, 4 stages"
  std::string why;   // "OOM on stage 0: 41.3 GB > 40.0 GB", "over budget: 1.92 USD > 1.50 USD"
};

struct SearchStats {
  std::int64_t dp_runs = 0;       // (mbs, D) pairs solved by the stage DP
  std::int64_t dp_states = 0;     // (depth, usage) states visited
  // (mbs, D) runs too large for the exact DP (kSeedStates in search.cpp), searched by beams of
  // the most promising states per depth instead (large clusters; docs/planner.md).
  std::int64_t beam_dp_runs = 0;
  // (mbs, D) runs skipped because the DP's relaxation showed they find nothing (not in dp_runs).
  std::int64_t dp_runs_ruled_out = 0;
  // Stage-DP solves (exact runs, capped seeds, beams) that took an identical earlier solve's
  // outcome from the mixed-type passes' memo (SearchOptions::reuse_identical_dp_runs).
  std::int64_t dp_solves_recalled = 0;
  std::int64_t evaluations = 0;   // evaluate() calls
  std::int64_t plans_considered = 0;
  int layers_per_dp_position = 1;  // > 1: the DP grouped layers (max_stage_dp_positions)

  // Adds another search's work (a retry, a mixed-type pass); layers_per_dp_position is a
  // setting of one search, not work, and stays this one's.
  SearchStats& operator+=(const SearchStats& other) {
    dp_runs += other.dp_runs;
    dp_states += other.dp_states;
    beam_dp_runs += other.beam_dp_runs;
    dp_runs_ruled_out += other.dp_runs_ruled_out;
    dp_solves_recalled += other.dp_solves_recalled;
    evaluations += other.evaluations;
    plans_considered += other.plans_considered;
    return *this;
  }
};

struct SearchResult {
  std::vector<RankedPlan> plans;       // best first; empty when nothing fits
  std::vector<Rejection> rejections;   // capped at options.max_rejections
  std::map<std::string, int> rejection_counts;  // by kind: "oom", "over-budget", ...
  SearchStats stats;
  std::string failure;  // when plans is empty: one line saying why
};

// Deepest model search_plans() takes (the stage DP stores block indices in 16 bits).
inline constexpr int kMaxSearchLayers = 30000;
// When a grouped search finds no plan, it is repeated with twice the DP positions up to this
// many (exact for models of up to 510 layers); the DP's memory grows with positions.
inline constexpr int kMaxRegroupPositions = 512;

SearchResult search_plans(const SearchRequest& request, const EvalContext& context);

// True when `a` is strictly better than `b` for the objective (ties: fewer GPUs, then lower
// cost, then fewer stages), so rankings are deterministic.
bool better_plan(const Evaluation& a, int gpus_a, int stages_a, const Evaluation& b, int gpus_b,
                 int stages_b, Objective objective);

}  // namespace flotilla::planner
