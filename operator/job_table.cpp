#include "operator/job_table.h"

#include <algorithm>

namespace flotilla::op {
namespace {

PlanOutcome plan_exactly(const JobSpec& spec, const planner::ClusterSpec& capacity, const planner::EvalContext& ctx,
                         int min_gpus, int max_gpus, const std::optional<JobPlan>& initial, bool suggest = false) {
  PlanConstraints limits;
  limits.suggest = suggest;
  limits.min_gpus = min_gpus;
  limits.max_gpus = max_gpus;
  if (initial) {
    limits.micro_batch_size = initial->micro_batch_size;
    if (spec.elasticity != ElasticityMode::kRelaxed) limits.dp = initial->dp;
  }
  return plan_job(spec, capacity, limits, ctx, 1);
}

}  // namespace

std::string job_table_key(const JobSpec& spec) {
  std::string key = spec.model_key();
  key += "|gbs=" + std::to_string(spec.global_batch_size);
  key += "|worker=" + std::to_string(static_cast<int>(spec.worker_kind));
  // Megatron's extra arguments can make every plan unlaunchable (megatron_launch.h refuses those
  // that override a rendered flag), so jobs that differ in them cannot share a table.
  if (spec.worker_kind == WorkerKind::kMegatron)
    for (const std::string& a : spec.worker_extra_args) key += "|arg=" + a;
  key += "|types=";
  for (const std::string& t : spec.gpu_types) key += t + ",";
  key += "|gpus=" + std::to_string(spec.min_gpus) + ".." + std::to_string(spec.max_gpus);
  key += spec.objective_cost ? "|cost" : "|throughput";
  if (spec.max_usd_per_hour) key += "|usd/h=" + std::to_string(*spec.max_usd_per_hour);
  key += std::string("|elasticity=") + to_string(spec.elasticity);
  return key;
}

JobTable build_job_table(const JobSpec& spec, const planner::ClusterSpec& capacity, const planner::EvalContext& ctx) {
  JobTable out;
  int total = 0;
  for (const planner::ClusterNode& n : capacity.nodes) total += n.gpus;
  const int cap = spec.max_gpus > 0 ? std::min(spec.max_gpus, total) : total;
  if (cap < spec.min_gpus) {
    out.why_not = "the cluster has " + std::to_string(total) +
                  " GPUs of the allowed types, spec.resources.minGPUs is " + std::to_string(spec.min_gpus);
    return out;
  }
  // Smallest feasible count: double up to the cap, then bisect (min_gpus >= 1: job_spec.h).
  int lo = spec.min_gpus, hi = lo;
  PlanOutcome found = plan_exactly(spec, capacity, ctx, spec.min_gpus, hi, std::nullopt);
  while (!found.plan && hi < cap) {
    lo = hi + 1;
    hi = std::min(cap, hi * 2);
    found = plan_exactly(spec, capacity, ctx, spec.min_gpus, hi, std::nullopt);
  }
  if (!found.plan) {
    // The probes skip the planner's suggestion (up to ~20 searches each); the answer has one.
    const PlanOutcome why = plan_exactly(spec, capacity, ctx, spec.min_gpus, hi, std::nullopt, /*suggest=*/true);
    out.why_not = why.message;
    // A plan Megatron cannot launch is not a question of fit; the planner's own failures keep
    // FitsNowhere, which users' alerts and the tests match.
    if (why.reason == "MegatronCannotRun") out.why_not_reason = why.reason;
    return out;
  }
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    PlanOutcome at = plan_exactly(spec, capacity, ctx, spec.min_gpus, mid, std::nullopt);
    if (at.plan) {
      hi = mid;
      found = at;
    } else {
      lo = mid + 1;
    }
  }
  const JobPlan initial = *found.plan;
  out.initial_gpus = initial.gpus;
  out.table.initial = {initial.dp, initial.pp, initial.tp, 1};
  out.table.cap_gpus = spec.elasticity == ElasticityMode::kOff ? initial.gpus : std::min(cap, 4 * initial.gpus);
  const int step = spec.elasticity == ElasticityMode::kRelaxed ? 1 : initial.dp * initial.tp;
  for (int n = initial.gpus; n <= out.table.cap_gpus; n += step) {
    const PlanOutcome at = n == initial.gpus ? found : plan_exactly(spec, capacity, ctx, n, n, initial);
    if (!at.plan || at.plan->gpus != n) continue;
    scaler::ScaleEntry e;
    e.gpus = n;
    e.config = {at.plan->dp, at.plan->pp, at.plan->tp, 1};
    e.iteration_s = at.plan->iteration_seconds;
    e.speedup = initial.tokens_per_second > 0 ? at.plan->tokens_per_second / initial.tokens_per_second : 1;
    e.modeled_speedup = e.speedup;
    for (const PlanStage& s : at.plan->stages) {
      e.blocks_per_stage.push_back(s.last_block - s.first_block + 1);
      e.tp_per_stage.push_back(s.tp);
      e.gpu_type_per_stage.push_back(s.gpu_type);
    }
    out.table.entries.push_back(e);
  }
  return out;
}

}  // namespace flotilla::op
