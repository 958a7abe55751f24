#include "scaler/planner_predictor.h"

#include <memory>

#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/network.h"
#include "planner/profile.h"
#include "scaler/pipeline_predictor.h"

namespace flotilla::scaler {

namespace {
struct PlannerWorld {
  planner::GpuCatalog catalog = planner::builtin_gpu_catalog();
  std::shared_ptr<const planner::ProfileSet> profiles;  // kept alive for `compute`
  planner::ComputeModel compute{nullptr};
  planner::NetworkModel network = planner::default_network_model();
};

planner::GpuCatalog with_node_size(const planner::GpuCatalog& catalog, const std::string& gpu,
                                   int gpus_per_node) {
  std::vector<planner::GpuType> types = catalog.types();
  const planner::GpuType* wanted = catalog.find(gpu);
  for (auto& t : types)
    if (wanted && t.name == wanted->name) t.gpus_per_node = gpus_per_node;
  return planner::GpuCatalog(std::move(types));
}
}  // namespace

PlannerPredictor make_planner_predictor(const PlannerJob& job) {
  PlannerPredictor out;
  auto world = std::make_shared<PlannerWorld>();
  if (job.gpus_per_node < 0) {
    out.error = "gpus_per_node must be >= 0 (0 = the catalog's node size)";
    return out;
  }
  if (job.gpus_per_node > 0)
    world->catalog = with_node_size(world->catalog, job.gpu_type, job.gpus_per_node);
  world->profiles = job.profiles;
  world->compute = planner::ComputeModel(world->profiles.get());
  if (job.network) world->network = *job.network;
  const planner::GpuType* gpu = world->catalog.find(job.gpu_type);
  if (!gpu) {
    std::string known;
    for (const planner::GpuType& t : world->catalog.types()) known += (known.empty() ? "" : ", ") + t.name;
    out.error = "unknown GPU type '" + job.gpu_type + "' for the planner-backed predictor: use a " +
                "catalog type (" + known + ")";
    return out;
  }
  if (job.initial.cp != 1) {
    out.error = "the planner models no context parallelism: initial cp must be 1";
    return out;
  }
  const auto& m = job.model;
  const int blocks = m.num_blocks();
  std::vector<double> block_s(blocks);
  for (int b = 0; b < blocks; ++b) {
    const auto t = world->compute.block_times(m, *gpu, b, job.initial.tp, 1);
    block_s[b] = t.forward_s + t.backward_s;
  }
  ElasticModel em;
  em.name = m.name;
  em.transformer_layers = m.num_layers;
  em.global_batch = job.global_batch;
  em.seq_len = m.seq_len;
  em.initial = job.initial;
  // Eq. 5 only needs the per-layer time as a common factor; take the planner's own.
  em.layer_fwd_s = block_s.size() > 2 ? block_s[1] / 3.0 : 1.0;
  em.layer_bwd_s = 2.0 * em.layer_fwd_s;
  em.gpu_memory_bytes = static_cast<double>(gpu->memory_bytes);
  em.checkpoint_bytes = 14.0 * static_cast<double>(planner::total_params(m));
  if (auto bad = em.validate(); !bad.empty()) {
    out.error = bad;
    return out;
  }
  const std::string gpu_name = gpu->name;
  const PlannerJob j = job;
  out.predictor = [world, block_s, gpu_name, j](const ParallelConfig& c) {
    PipelinePrediction p;
    if (c.cp != 1) {
      p.infeasible_reason = "the planner models no context parallelism (cp must be 1)";
      return p;
    }
    if (c.dp < 1 || c.pp < 1 || c.tp < 1 || j.global_batch % c.dp != 0) {
      p.infeasible_reason = "global batch not divisible by DP " + std::to_string(c.dp);
      return p;
    }
    // Split the blocks (embedding, layers, head) to balance the planner's block times.
    const auto split = balanced_split(block_s, c.pp, 0.0, 0.0);
    if (split.empty()) {
      p.infeasible_reason = "PP " + std::to_string(c.pp) + " exceeds the model's blocks";
      return p;
    }
    planner::Plan plan;
    plan.micro_batch_size = 1;
    plan.global_batch_size = j.global_batch;
    plan.options = j.options;
    int first = 0;
    for (int n : split) {
      planner::Stage s;
      s.first_block = first;
      s.last_block = first + n;
      s.tp = c.tp;
      s.replicas.assign(c.dp, planner::Replica{gpu_name, "default", 0});
      plan.stages.push_back(std::move(s));
      first += n;
    }
    planner::EvalContext ctx;
    ctx.catalog = &world->catalog;
    ctx.compute = &world->compute;
    ctx.network = &world->network;
    const auto ev = planner::evaluate(plan, j.model, ctx);
    p.layers_per_stage = split;
    for (const auto& st : ev.stages) p.peak_bytes_per_stage.push_back(static_cast<double>(st.peak_bytes));
    p.iteration_s = ev.iter_seconds;
    if (!ev.feasible()) {
      p.infeasible_reason = ev.infeasible->message;
      return p;
    }
    p.feasible = true;
    return p;
  };
  out.elastic_model = em;
  return out;
}

}  // namespace flotilla::scaler
