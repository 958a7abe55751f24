// Plan and place in one call: a model, what the job asks for and a snapshot of the cluster's
// free GPUs go in; the best plan that the packer can place, with the node of every pipeline
// stage replica (TP group), comes out, or a typed reason why not and the smallest change that
// fits. `flotilla plan` is a shell over this call; the simulator and the operator call it too.
//
// Guarantees: pure and deterministic (no I/O, no clock, no threads): the same inputs give the
//   same result, field for field. On success every (stage, replica) of the chosen plan is in
//   `placement` exactly once, on a node of the replica's GPU type and zone, a TP group never
//   spans nodes, and no node gives more GPUs than it has free. The chosen plan is the first of
//   the ranked plans (search.h) that the packer places (packer.h, Frenzy HAS). On failure
//   `failure` names the kind and `message` is one line; with options.suggest, `suggestion`
//   carries the smallest change found by suggest.h as changed inputs (request and cluster)
//   that, passed back to plan_and_place(), plan and place.
// Assumes: cluster node GPU types are catalog names (parse_cluster() canonicalises them; nodes
//   of an unknown type are ignored); node names are unique; free GPU counts are what this job
//   may take now.
// Caveats: classifying "not enough GPUs" against "fits nowhere" uses the suggestion (more GPUs
//   of a type already there → kNotEnoughFreeGpus); with options.suggest off, a plan that only
//   more GPUs would fix is reported as kFitsNowhere. A suggestion is up to ~20 searches.
//   kCannotPlaceOnNodes (the search found plans, none packs on whole nodes) has no suggestion.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/search.h"
#include "planner/suggest.h"

namespace flotilla::planner {

// What a worker kind can run. A plan always has one micro-batch size for all stages.
struct WorkerConstraints {
  std::vector<int> tp_degrees = {1, 2, 4, 8};  // TP degrees the worker runs
  bool uniform_tp = false;                     // one TP degree for all stages
  std::vector<int> micro_batch_sizes = {1, 2, 4, 8};  // {k}: a fixed micro-batch size
  std::vector<int> dp_degrees;  // {d}: a fixed data-parallel degree (strict rescale); empty: any
  bool recompute = true;        // the worker can recompute activations (a suggestion may say so)
};

// Flotilla's reference worker (worker/): no tensor parallelism.
WorkerConstraints reference_worker_constraints();
// How the reference worker trains: fp32 weights, gradients, AdamW state and activations, no
// dropout, materialised attention probabilities (the memory model's reference-worker count).
TrainingOptions reference_worker_training();
// Megatron-LM: tensor_model_parallel_size is one number for the whole job.
WorkerConstraints megatron_constraints();

struct PlaceRequest {
  // The model: `model` when set, else the preset named `model_name` (find_preset()).
  std::optional<ModelSpec> model;
  std::string model_name;
  int global_batch_size = 0;  // sequences per iteration; never changed by the plan
  Objective objective = Objective::kMaxThroughput;
  TrainingOptions training;
  std::vector<std::string> allowed_gpu_types;  // catalog names or aliases; empty: any
  int min_gpus = 0;                            // 0: no lower bound
  int max_gpus = 0;                            // 0: no upper bound
  WorkerConstraints worker;
  // Budget, minimum tokens/s and quotas; the cluster's quotas apply too (the smaller wins).
  SearchConstraints constraints;
  int max_plans = 8;        // ranked plans kept (the packer falls through them in order)
  int max_rejections = 12;  // rejection lines kept (SearchOptions::max_rejections)
  bool suggest = true;      // on failure, search for the smallest change that fits
};

enum class PlaceFailure {
  kNone,
  kInvalidRequest,      // a bad field: batch <= 0, min_gpus > max_gpus, no TP degree, ...
  kUnknownModel,        // no spec and no preset of that name, or a spec with no layers
  kUnknownGpuType,      // an allowed GPU type the catalog does not know
  kBatchNotDivisible,   // no allowed micro-batch size divides the global batch
  kNotEnoughFreeGpus,   // too few free GPUs of the allowed types (more would fit)
  kFitsNowhere,         // the model does not fit these GPU types as asked
  kConstraintsUnmet,    // plans exist but break the budget / throughput floor / quotas / GPU range
  kCannotPlaceOnNodes,  // plans exist but none packs on whole nodes (TP groups, fragmentation)
};

const char* to_string(PlaceFailure failure);

// One pipeline stage replica (a TP group of `gpus` GPUs) on one node.
struct GroupPlacement {
  int stage = 0;
  int replica = 0;  // 0..D-1
  std::string node;
  int gpus = 0;     // = the stage's TP degree
};

// The smallest change that fits, as inputs to pass back to plan_and_place().
struct SuggestedChange {
  ChangeKind kind = ChangeKind::kRecompute;
  std::string change;  // one phrase, as suggest.h words it
  RankedPlan plan;     // the best plan with the change (as searched; placement not checked)
  PlaceRequest request;
  ClusterSpec cluster;  // new nodes are named "suggested-<type>-<zone>-<i>"
};

struct PlaceResult {
  PlaceFailure failure = PlaceFailure::kNone;
  std::string message;  // one line when failure != kNone
  std::optional<SuggestedChange> suggestion;
  ModelSpec model;      // the resolved model (empty name on kUnknownModel)
  SearchRequest search_request;  // as built from the inputs (for callers that re-search)
  SearchResult search;  // ranked plans, rejections, stats, failure line (when searched)
  std::size_t chosen = 0;  // index into search.plans of the placed plan (when ok())
  std::vector<GroupPlacement> placement;     // stage-major, then replica
  std::map<std::string, int> gpus_by_node;  // node -> GPUs taken
  std::vector<std::string> not_placed;       // one line per ranked plan the packer skipped

  bool ok() const { return failure == PlaceFailure::kNone; }
  const RankedPlan& plan() const { return search.plans.at(chosen); }
};

PlaceResult plan_and_place(const PlaceRequest& request, const ClusterSpec& cluster,
                           const EvalContext& context);

}  // namespace flotilla::planner
