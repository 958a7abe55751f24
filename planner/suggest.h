// "The model fits nowhere": the smallest change to the request that would make it fit.
//
// Guarantees: suggest_change() only names a change after re-running search_plans() with that
//   change and getting a plan; it tries, smallest first: selective then full activation
//   recompute (no new hardware; only where SearchOptions::suggest_recompute), larger tensor parallelism where small
//   nodes capped it (TP >= k needs nodes with k GPUs), more GPUs of a type already in the cluster (the fewest that
//   work, in whole nodes), then GPUs of a larger-memory type from the catalog. Pure.
// Assumes: the request failed as given (it is not re-checked).
// Caveats: "more GPUs" doubles a pool until it fits (up to 16x), so the count named is within
//   2x of the true minimum; each try is a full search, so this costs up to ~20 searches. A
//   try on a deep model is not regrouped when it finds nothing (search.h), so a change that
//   needs single-layer stages may be missed or overstated.
#pragma once

#include <optional>
#include <string>

#include "planner/search.h"

namespace flotilla::planner {

// What kind of change a suggestion makes (for callers that apply it rather than print it).
enum class ChangeKind {
  kRaiseBudget,          // constraints.max_usd_per_iteration
  kLowerMinThroughput,   // constraints.min_tokens_per_second
  kRecompute,            // training.recompute
  kLargerNodes,          // pools of one GPU type get nodes of `node_gpus` GPUs (same count)
  kMoreGpus,             // pools of one GPU type grow by `added_gpus` in all
  kNewGpuType,           // a pool of `added_gpus` GPUs of a new type, nodes of `node_gpus`
};

struct Suggestion {
  std::string change;   // one phrase: "add 8 more A100-40 GPUs", "use --recompute full"
  RankedPlan plan;      // the best plan with that change
  ChangeKind kind = ChangeKind::kRecompute;
  SearchRequest request;  // the request with the change applied (it produced `plan`)
  std::string gpu_type;   // kLargerNodes, kMoreGpus, kNewGpuType
  int added_gpus = 0;     // kMoreGpus, kNewGpuType
  int node_gpus = 0;      // kLargerNodes, kNewGpuType
};

std::optional<Suggestion> suggest_change(const SearchRequest& request, const EvalContext& context);

}  // namespace flotilla::planner
