#include "planner/plan_and_place.h"

#include <algorithm>
#include <deque>

#include "planner/plan_placement.h"

namespace flotilla::planner {

WorkerConstraints reference_worker_constraints() {
  WorkerConstraints worker;
  worker.tp_degrees = {1};
  worker.recompute = false;  // it keeps every activation (worker/model/stage.h)
  return worker;
}

TrainingOptions reference_worker_training() {
  TrainingOptions o;
  o.precision = Precision::kFp32;
  o.fused_softmax = false;
  o.flash_attention = false;
  o.reference_worker_activations = true;
  return o;
}

WorkerConstraints megatron_constraints() {
  WorkerConstraints worker;
  worker.uniform_tp = true;
  return worker;
}

const char* to_string(PlaceFailure failure) {
  switch (failure) {
    case PlaceFailure::kNone: return "none";
    case PlaceFailure::kInvalidRequest: return "InvalidRequest";
    case PlaceFailure::kUnknownModel: return "UnknownModel";
    case PlaceFailure::kUnknownGpuType: return "UnknownGpuType";
    case PlaceFailure::kBatchNotDivisible: return "BatchNotDivisible";
    case PlaceFailure::kNotEnoughFreeGpus: return "NotEnoughFreeGpus";
    case PlaceFailure::kFitsNowhere: return "FitsNowhere";
    case PlaceFailure::kConstraintsUnmet: return "ConstraintsUnmet";
    case PlaceFailure::kCannotPlaceOnNodes: return "CannotPlaceOnNodes";
  }
  return "?";
}

namespace {

PlaceResult fail(PlaceResult result, PlaceFailure failure, std::string message) {
  result.failure = failure;
  result.message = std::move(message);
  return result;
}

// "" when the request's own fields are usable, else one line.
std::string invalid_field(const PlaceRequest& request) {
  if (request.global_batch_size <= 0)
    return "global batch size must be positive, got " + std::to_string(request.global_batch_size);
  if (request.min_gpus < 0 || request.max_gpus < 0) return "min_gpus and max_gpus must be >= 0";
  if (request.max_gpus > 0 && request.min_gpus > request.max_gpus)
    return "min_gpus " + std::to_string(request.min_gpus) + " > max_gpus " + std::to_string(request.max_gpus);
  if (request.worker.tp_degrees.empty()) return "the worker allows no TP degree";
  for (int tp : request.worker.tp_degrees)
    if (tp <= 0) return "TP degrees must be positive, got " + std::to_string(tp);
  if (request.worker.micro_batch_sizes.empty()) return "the worker allows no micro-batch size";
  if (request.max_plans <= 0) return "max_plans must be positive";
  return "";
}

// The allowed types as catalog names; "" or the first unknown name.
std::string canonical_types(const std::vector<std::string>& names, const GpuCatalog& catalog,
                            std::vector<std::string>& out) {
  for (const std::string& name : names) {
    const GpuType* gpu = catalog.find(name);
    if (gpu == nullptr) return name;
    if (std::find(out.begin(), out.end(), gpu->name) == out.end()) out.push_back(gpu->name);
  }
  return "";
}

ClusterSpec allowed_nodes(const ClusterSpec& cluster, const std::vector<std::string>& types,
                          const GpuCatalog& catalog) {
  ClusterSpec kept = cluster;
  kept.nodes.clear();
  for (const ClusterNode& node : cluster.nodes) {
    const GpuType* gpu = catalog.find(node.gpu_type);
    if (gpu == nullptr || node.gpus <= 0) continue;
    if (!types.empty() && std::find(types.begin(), types.end(), gpu->name) == types.end()) continue;
    ClusterNode copy = node;
    copy.gpu_type = gpu->name;
    if (copy.region.empty()) copy.region = copy.zone;
    kept.nodes.push_back(std::move(copy));
  }
  return kept;
}

void merge_quota(std::map<std::string, int>& into, const std::map<std::string, int>& from) {
  for (const auto& [key, cap] : from) {
    auto [it, added] = into.emplace(key, cap);
    if (!added) it->second = std::min(it->second, cap);
  }
}

SearchRequest search_request(const PlaceRequest& request, const ModelSpec& model,
                             const ClusterSpec& cluster) {
  SearchRequest search;
  search.model = model;
  search.global_batch_size = request.global_batch_size;
  search.training = request.training;
  search.pools = gpu_pools(cluster);
  search.objective = request.objective;
  search.constraints = request.constraints;
  merge_quota(search.constraints.max_gpus_per_type, cluster.max_gpus_per_type);
  merge_quota(search.constraints.max_gpus_per_zone, cluster.max_gpus_per_zone);
  if (request.min_gpus > 0) search.constraints.min_gpus = request.min_gpus;
  if (request.max_gpus > 0) search.constraints.max_gpus = request.max_gpus;
  search.options.tp_degrees = request.worker.tp_degrees;
  search.options.uniform_tp = request.worker.uniform_tp;
  search.options.micro_batch_sizes = request.worker.micro_batch_sizes;
  search.options.dp_degrees = request.worker.dp_degrees;
  search.options.suggest_recompute = request.worker.recompute;
  search.options.max_plans = request.max_plans;
  search.options.max_rejections = request.max_rejections;
  return search;
}

std::string suggested_name(const std::string& type, const std::string& zone, int index) {
  return "suggested-" + type + "-" + zone + "-" + std::to_string(index);
}

// `gpus` more GPUs of `type` in (zone, region), in nodes of `node_gpus` (the last may be smaller).
void add_nodes(ClusterSpec& cluster, const std::string& type, const std::string& zone,
               const std::string& region, int gpus, int node_gpus) {
  node_gpus = std::max(node_gpus, 1);
  for (int index = 0; gpus > 0; ++index) {
    const int take = std::min(gpus, node_gpus);
    cluster.nodes.push_back({suggested_name(type, zone, index), type, take, zone, region});
    gpus -= take;
  }
}

// The type's nodes regrouped into nodes of `node_gpus`, zone by zone (same GPUs in all).
void resize_nodes(ClusterSpec& cluster, const std::string& type, int node_gpus) {
  std::map<std::pair<std::string, std::string>, int> per_zone;
  std::vector<ClusterNode> others;
  for (const ClusterNode& node : cluster.nodes) {
    if (node.gpu_type == type) per_zone[{node.zone, node.region}] += node.gpus;
    else others.push_back(node);
  }
  cluster.nodes = std::move(others);
  for (const auto& [where, gpus] : per_zone) add_nodes(cluster, type, where.first, where.second, gpus, node_gpus);
}

// suggest.h's change, expressed on the caller's inputs.
SuggestedChange as_inputs(Suggestion s, const PlaceRequest& request, const ClusterSpec& cluster,
                          const SearchRequest& searched, const GpuCatalog& catalog) {
  SuggestedChange out{s.kind, s.change, std::move(s.plan), request, cluster};
  switch (s.kind) {
    case ChangeKind::kRaiseBudget:
      out.request.constraints.max_usd_per_iteration = s.request.constraints.max_usd_per_iteration;
      break;
    case ChangeKind::kLowerMinThroughput:
      out.request.constraints.min_tokens_per_second = s.request.constraints.min_tokens_per_second;
      break;
    case ChangeKind::kRecompute:
      out.request.training.recompute = s.request.training.recompute;
      break;
    case ChangeKind::kLargerNodes:
      resize_nodes(out.cluster, s.gpu_type, s.node_gpus);
      break;
    case ChangeKind::kMoreGpus:
      for (std::size_t p = 0; p < searched.pools.size() && p < s.request.pools.size(); ++p) {
        const GpuPool& before = searched.pools[p];
        const int node = before.largest_node_gpus > 0 ? before.largest_node_gpus
                                                       : catalog.find(before.gpu_type)->gpus_per_node;
        add_nodes(out.cluster, before.gpu_type, before.zone, before.region,
                  s.request.pools[p].gpus - before.gpus, node);
      }
      break;
    case ChangeKind::kNewGpuType:
      for (std::size_t p = searched.pools.size(); p < s.request.pools.size(); ++p) {
        const GpuPool& added = s.request.pools[p];
        add_nodes(out.cluster, added.gpu_type, added.zone, added.region, added.gpus, s.node_gpus);
      }
      break;
  }
  return out;
}

PlaceFailure classify(const SearchResult& search, const std::optional<Suggestion>& suggestion) {
  if (suggestion) {
    switch (suggestion->kind) {
      case ChangeKind::kRaiseBudget:
      case ChangeKind::kLowerMinThroughput: return PlaceFailure::kConstraintsUnmet;
      case ChangeKind::kMoreGpus: return PlaceFailure::kNotEnoughFreeGpus;
      default: return PlaceFailure::kFitsNowhere;
    }
  }
  for (const char* kind : {"over-budget", "below-min-throughput", "over-quota", "gpu-count"})
    if (search.rejection_counts.count(kind) > 0) return PlaceFailure::kConstraintsUnmet;
  return PlaceFailure::kFitsNowhere;
}

// The smallest change, searched with the catalog narrowed to the allowed types.
std::optional<Suggestion> suggestion_for(const SearchRequest& searched, const EvalContext& context,
                                         const std::vector<std::string>& allowed) {
  if (allowed.empty()) return suggest_change(searched, context);
  std::vector<GpuType> types;
  for (const GpuType& gpu : context.catalog->types())
    if (std::find(allowed.begin(), allowed.end(), gpu.name) != allowed.end()) types.push_back(gpu);
  const GpuCatalog narrowed(std::move(types));
  EvalContext narrow = context;
  narrow.catalog = &narrowed;
  return suggest_change(searched, narrow);
}

PlaceResult search_failed(PlaceResult result, PlaceFailure pre_failure, std::string why,
                          const PlaceRequest& request, const ClusterSpec& cluster,
                          const EvalContext& context, const std::vector<std::string>& allowed) {
  std::optional<Suggestion> suggestion;
  if (request.suggest) suggestion = suggestion_for(result.search_request, context, allowed);
  const PlaceFailure failure =
      pre_failure != PlaceFailure::kNone ? pre_failure : classify(result.search, suggestion);
  std::string line = result.model.name + ": " + why;
  if (suggestion) {
    line += "; smallest change that fits: " + suggestion->change;
    result.suggestion =
        as_inputs(std::move(*suggestion), request, cluster, result.search_request, *context.catalog);
  } else if (request.suggest) {
    line += std::string("; no single change tried (") + (request.worker.recompute ? "recompute, " : "") +
            "larger TP, up to 16x the GPUs, a larger GPU type) makes it fit";
  }
  return fail(std::move(result), failure, std::move(line));
}

// Every (stage, replica) TP group on the node the packer gave its demand, in allocation order.
std::vector<GroupPlacement> group_placement(const Plan& plan, const PlacementRequest& demands,
                                            const std::vector<NodeAllocation>& allocations) {
  std::vector<std::deque<std::string>> groups(demands.demands.size());
  for (const NodeAllocation& a : allocations) {
    const int size = demands.demands[a.demand_index].gpus_per_group;
    for (int g = 0; g < a.gpus / size; ++g) groups[a.demand_index].push_back(a.node);
  }
  std::vector<GroupPlacement> out;
  for (int s = 0; s < plan.num_stages(); ++s) {
    const Stage& stage = plan.stages[s];
    for (int r = 0; r < stage.dp(); ++r) {
      const Replica& replica = stage.replicas[r];
      for (std::size_t d = 0; d < demands.demands.size(); ++d) {
        const GpuDemand& demand = demands.demands[d];
        if (demand.gpu_type != replica.gpu_type || demand.zone != replica.zone ||
            demand.gpus_per_group != stage.replica_tp(r) || groups[d].empty())
          continue;
        out.push_back({s, r, groups[d].front(), stage.replica_tp(r)});
        groups[d].pop_front();
        break;
      }
    }
  }
  return out;
}

// Fills result.model and `allowed`; kNone when the inputs can be searched, else the failure
// with result.message set.
PlaceFailure check_inputs(const PlaceRequest& request, const EvalContext& context,
                          PlaceResult& result, std::vector<std::string>& allowed) {
  auto failure = [&](PlaceFailure kind, std::string message) {
    result.message = std::move(message);
    return kind;
  };
  if (context.catalog == nullptr || context.compute == nullptr || context.network == nullptr)
    return failure(PlaceFailure::kInvalidRequest,
                   "plan_and_place needs a GPU catalog, a compute model and a network model");
  if (request.model) result.model = *request.model;
  else if (auto preset = find_preset(request.model_name)) result.model = *preset;
  else return failure(PlaceFailure::kUnknownModel, "unknown model '" + request.model_name + "': give a spec or a preset name");
  const ModelSpec& model = result.model;
  if (model.num_layers <= 0)
    return failure(PlaceFailure::kUnknownModel, "model '" + model.name + "' has no transformer layers");
  if (model.num_layers > kMaxSearchLayers)
    return failure(PlaceFailure::kInvalidRequest,
                   model.name + " has " + std::to_string(model.num_layers) +
                       " transformer layers; the search handles at most " + std::to_string(kMaxSearchLayers));
  if (std::string bad = invalid_field(request); !bad.empty())
    return failure(PlaceFailure::kInvalidRequest, model.name + ": " + bad);
  if (std::string unknown = canonical_types(request.allowed_gpu_types, *context.catalog, allowed); !unknown.empty())
    return failure(PlaceFailure::kUnknownGpuType,
                   "unknown GPU type '" + unknown + "' in the allowed types (not in the GPU catalog)");
  const std::vector<int>& sizes = request.worker.micro_batch_sizes;
  if (std::none_of(sizes.begin(), sizes.end(),
                   [&](int mbs) { return mbs > 0 && request.global_batch_size % mbs == 0; }))
    return failure(PlaceFailure::kBatchNotDivisible,
                   model.name + ": global batch " + std::to_string(request.global_batch_size) +
                       " is not a multiple of any allowed micro-batch size");
  return PlaceFailure::kNone;
}

// The first ranked plan the packer places, and where each of its TP groups goes.
PlaceResult place(PlaceResult result, const ClusterSpec& usable) {
  std::vector<PlacementRequest> ranked;
  for (const RankedPlan& plan : result.search.plans) ranked.push_back(placement_request(plan.plan));
  PackResult packed = pack_first_feasible(ranked, free_nodes(usable));
  result.not_placed = std::move(packed.rejections);
  if (!packed.placed) {
    // Built before the call: the argument that moves `result` may be evaluated first.
    std::string line = result.model.name + ": no ranked plan can be placed on whole nodes (" +
                       (result.not_placed.empty() ? std::string("?") : result.not_placed.front()) +
                       "); use nodes with more free GPUs per node";
    return fail(std::move(result), PlaceFailure::kCannotPlaceOnNodes, std::move(line));
  }
  result.chosen = packed.request_index;
  result.gpus_by_node = gpus_by_node(packed.allocations);
  result.placement = group_placement(result.plan().plan, ranked[result.chosen], packed.allocations);
  return result;
}

}  // namespace

PlaceResult plan_and_place(const PlaceRequest& request, const ClusterSpec& cluster,
                           const EvalContext& context) {
  PlaceResult result;
  std::vector<std::string> allowed;
  if (PlaceFailure bad = check_inputs(request, context, result, allowed); bad != PlaceFailure::kNone) {
    result.failure = bad;
    return result;
  }
  const ClusterSpec usable = allowed_nodes(cluster, allowed, *context.catalog);
  result.search_request = search_request(request, result.model, usable);
  int free_gpus = 0;
  for (const ClusterNode& node : usable.nodes) free_gpus += node.gpus;
  if (free_gpus == 0 || free_gpus < request.min_gpus)
    return search_failed(std::move(result), PlaceFailure::kNotEnoughFreeGpus,
                         std::to_string(free_gpus) + " GPUs of the allowed types are free" +
                             (request.min_gpus > 0 ? ", the job needs at least " + std::to_string(request.min_gpus) : ""),
                         request, cluster, context, allowed);
  result.search = search_plans(result.search_request, context);
  if (result.search.plans.empty()) {
    std::string why = result.search.failure;  // copied first: `result` is moved in the call
    return search_failed(std::move(result), PlaceFailure::kNone, std::move(why), request, cluster,
                         context, allowed);
  }
  return place(std::move(result), usable);
}

}  // namespace flotilla::planner
