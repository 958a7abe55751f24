#include "operator/job_plan.h"

#include <algorithm>
#include <tuple>

#include <map>

#include "operator/megatron_launch.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

planner::ModelSpec inline_model(const JobSpec& spec) {
  planner::ModelSpec m;
  m.name = spec.model;
  m.family = planner::ModelFamily::kGpt;
  m.num_layers = spec.model_spec->num_layers;
  m.hidden = spec.model_spec->hidden;
  m.heads = spec.model_spec->heads;
  m.head_dim = m.hidden / m.heads;
  m.ffn_hidden = spec.model_spec->ffn_hidden > 0 ? spec.model_spec->ffn_hidden : 4 * m.hidden;
  m.vocab = spec.model_spec->vocab_size;
  m.seq_len = spec.model_spec->seq_len;
  m.max_position_embeddings = m.seq_len;
  m.tied_embeddings = false;
  return m;
}

planner::PlaceRequest place_request(const JobSpec& spec, const PlanConstraints& limits) {
  planner::PlaceRequest request;
  if (spec.model_spec) request.model = inline_model(spec);
  request.model_name = spec.model;
  request.global_batch_size = spec.global_batch_size;
  request.objective = spec.objective_cost ? planner::Objective::kMinCost : planner::Objective::kMaxThroughput;
  request.allowed_gpu_types = spec.gpu_types;
  request.min_gpus = limits.min_gpus;
  request.max_gpus = limits.max_gpus;
  request.worker = spec.worker_kind == WorkerKind::kFlotilla ? planner::reference_worker_constraints()
                                                             : planner::megatron_constraints();
  // Neither kind is launched with a recompute setting (launch/megatron.h renders none), so a
  // "fits nowhere" must not tell the user to enable it.
  request.worker.recompute = false;
  // The reference worker trains in fp32 without dropout: plan its memory as it really is.
  if (spec.worker_kind == WorkerKind::kFlotilla) request.training = planner::reference_worker_training();
  if (limits.micro_batch_size) request.worker.micro_batch_sizes = {*limits.micro_batch_size};
  if (limits.dp) request.worker.dp_degrees = {*limits.dp};
  request.suggest = limits.suggest;
  // spec.budget is per hour; the search bounds USD per iteration, which depends on the plan's
  // speed, so plan_job() checks the budget on the chosen plan instead.
  return request;
}

// rank = replica x PP + stage (worker/runtime/layout.h); one pod per node.
void assign_pods(const std::string& job, const planner::PlaceResult& placed, JobPlan& out) {
  const planner::Plan& plan = placed.plan().plan;
  std::map<std::string, PlanPod> by_node;
  for (const planner::GroupPlacement& g : placed.placement) {
    PlanPod& pod = by_node[g.node];
    pod.node = g.node;
    pod.gpu_type = plan.stages[g.stage].replicas[g.replica].gpu_type;
    pod.gpus += g.gpus;
    pod.ranks.push_back(g.replica * plan.num_stages() + g.stage);
  }
  for (auto& [node, pod] : by_node) {
    std::sort(pod.ranks.begin(), pod.ranks.end());
    pod.name = pod_name(job, node, pod.gpus);
    if (pod.ranks.front() == 0) out.rendezvous_pod = pod.name;
    out.pods.push_back(pod);
  }
  for (const planner::GroupPlacement& g : placed.placement) {
    std::vector<std::string>& names = out.stages[g.stage].pods;
    const std::string name = pod_name(job, g.node, by_node[g.node].gpus);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
}

// Megatron's ranks and pods (launch/megatron.h): node rank r holds ranks [r·g, (r+1)·g), stage
// s ranks [s·TP·DP, (s+1)·TP·DP); a node's second and later pods get a -<k> suffix.
void assign_megatron_pods(const std::string& job, const std::string& script, const launch::MegatronLaunch& launch,
                          JobPlan& out) {
  std::map<std::string, int> pods_on_node;
  const int stage_ranks = launch.tp * launch.dp;
  for (const launch::PodLaunch& l : launch.pods) {
    PlanPod pod;
    pod.node = l.node;
    pod.gpu_type = l.gpu_type;
    pod.gpus = l.gpus;
    const int k = pods_on_node[l.node]++;
    pod.name = pod_name(job, l.node, l.gpus) + (k > 0 ? "-" + std::to_string(k) : "");
    for (int r = 0; r < l.gpus; ++r) pod.ranks.push_back(l.first_global_rank + r);
    if (l.node_rank == 0) out.rendezvous_pod = pod.name;
    for (int s = pod.ranks.front() / stage_ranks; s <= pod.ranks.back() / stage_ranks; ++s)
      out.stages[s].pods.push_back(pod.name);
    out.pods.push_back(std::move(pod));
  }
  out.megatron_args = {script};
  out.megatron_args.insert(out.megatron_args.end(), launch.megatron_args.begin(), launch.megatron_args.end());
}

// Each pod's prediction: the largest rank peak of its GPU type in the stages it runs (a stage may
// mix types, whose ranks differ).
void predict_pods(const planner::Evaluation& evaluation, JobPlan& out) {
  for (PlanPod& pod : out.pods)
    for (std::size_t s = 0; s < out.stages.size(); ++s) {
      const std::vector<std::string>& names = out.stages[s].pods;
      if (std::find(names.begin(), names.end(), pod.name) == names.end()) continue;
      for (const planner::RankReport& rank : evaluation.ranks)
        if (rank.stage == static_cast<int>(s) && rank.gpu_type == pod.gpu_type)
          pod.predicted_peak_bytes = std::max(pod.predicted_peak_bytes, rank.memory.peak_bytes);
    }
}

JobPlan to_job_plan(const JobSpec& spec, const planner::PlaceResult& placed, const PlanConstraints& limits,
                    std::int64_t epoch, const launch::MegatronLaunch* megatron) {
  const planner::RankedPlan& ranked = placed.plan();
  const planner::Plan& plan = ranked.plan;
  JobPlan out;
  out.epoch = epoch;
  out.gpus = plan.num_gpus();
  out.pp = plan.num_stages();
  out.dp = plan.dp();
  out.tp = plan.stages.front().tp;
  out.micro_batch_size = plan.micro_batch_size;
  out.micro_batches = plan.num_micro_batches();
  out.virtual_shards = limits.virtual_shards.value_or(spec.global_batch_size / plan.micro_batch_size);
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const planner::Stage& st = plan.stages[s];
    out.partition += (s ? "," : "") + std::to_string(st.first_block) + ":" + std::to_string(st.last_block);
    PlanStage ps;
    ps.gpu_type = st.replicas.front().gpu_type;
    ps.tp = st.tp;
    ps.first_block = st.first_block;
    ps.last_block = st.last_block - 1;
    if (s < ranked.evaluation.stages.size()) ps.predicted_peak_bytes = ranked.evaluation.stages[s].peak_bytes;
    out.stages.push_back(ps);
  }
  out.iteration_seconds = ranked.evaluation.iter_seconds;
  out.tokens_per_second = ranked.evaluation.tokens_per_second;
  if (ranked.evaluation.iter_seconds > 0)
    out.usd_per_hour = ranked.evaluation.usd_per_iteration * 3600.0 / ranked.evaluation.iter_seconds;
  if (megatron != nullptr)
    assign_megatron_pods(spec.name, spec.megatron.script, *megatron, out);
  else
    assign_pods(spec.name, placed, out);
  predict_pods(ranked.evaluation, out);
  return out;
}

}  // namespace

PodPrediction JobPlan::predicted_for(const std::string& pod) const {
  PodPrediction out;
  const auto p = std::find_if(pods.begin(), pods.end(), [&](const PlanPod& x) { return x.name == pod; });
  if (p != pods.end()) out = {p->predicted_peak_bytes, p->headroom_bytes};
  if (out.peak_bytes > 0) return out;
  for (const PlanStage& stage : stages)
    if (std::find(stage.pods.begin(), stage.pods.end(), pod) != stage.pods.end())
      out.peak_bytes = std::max(out.peak_bytes, stage.predicted_peak_bytes);
  return out;
}

std::optional<double> remaining_train_seconds(const JobPlan& plan, std::int64_t train_steps, const Json& progress) {
  if (plan.iteration_seconds <= 0) return std::nullopt;
  const double measured_tokens_per_s = number_at(progress, "/tokensPerSecond"_json_pointer);
  const double step_s = measured_tokens_per_s > 0 && plan.tokens_per_second > 0
                            ? plan.iteration_seconds * plan.tokens_per_second / measured_tokens_per_s
                            : plan.iteration_seconds;
  return std::max(0.0, static_cast<double>(train_steps) - number_at(progress, "/step"_json_pointer)) * step_s;
}

bool same_workers(const JobPlan& a, const JobPlan& b) {
  const auto stage_key = [](const PlanStage& s) {
    return std::tie(s.gpu_type, s.tp, s.first_block, s.last_block, s.pods);
  };
  const auto pod_key = [](const PlanPod& p) { return std::tie(p.name, p.node, p.gpu_type, p.gpus, p.ranks); };
  if (std::tie(a.gpus, a.pp, a.dp, a.tp, a.micro_batch_size, a.micro_batches, a.virtual_shards, a.partition,
               a.rendezvous_pod, a.megatron_args) != std::tie(b.gpus, b.pp, b.dp, b.tp, b.micro_batch_size,
                                                              b.micro_batches, b.virtual_shards, b.partition,
                                                              b.rendezvous_pod, b.megatron_args))
    return false;
  return std::equal(a.stages.begin(), a.stages.end(), b.stages.begin(), b.stages.end(),
                    [&](const PlanStage& x, const PlanStage& y) { return stage_key(x) == stage_key(y); }) &&
         std::equal(a.pods.begin(), a.pods.end(), b.pods.begin(), b.pods.end(),
                    [&](const PlanPod& x, const PlanPod& y) { return pod_key(x) == pod_key(y); });
}

std::string JobPlan::summary() const {
  return "PP" + std::to_string(pp) + "\u00b7DP" + std::to_string(dp) + "\u00b7TP" + std::to_string(tp);
}

Json JobPlan::to_status() const {
  Json stages_json = Json::array();
  for (const PlanStage& s : stages)
    stages_json.push_back({{"gpuType", s.gpu_type},
                           {"tp", s.tp},
                           {"firstLayer", s.first_block},
                           {"lastLayer", s.last_block},
                           {"pods", s.pods},
                           {"predictedPeakBytes", s.predicted_peak_bytes}});
  Json pods_json = Json::array();
  for (const PlanPod& p : pods) {
    pods_json.push_back(
        {{"name", p.name}, {"node", p.node}, {"gpuType", p.gpu_type}, {"gpus", p.gpus}, {"ranks", p.ranks}});
    if (p.predicted_peak_bytes > 0) pods_json.back()["predictedPeakBytes"] = p.predicted_peak_bytes;
    if (p.headroom_bytes > 0) pods_json.back()["headroomBytes"] = p.headroom_bytes;
  }
  Json out = {{"epoch", epoch},
              {"summary", summary()},
              {"gpus", gpus},
              {"pp", pp},
              {"dp", dp},
              {"tp", tp},
              {"microBatchSize", micro_batch_size},
              {"microBatches", micro_batches},
              {"virtualShards", virtual_shards},
              {"partition", partition},
              {"rendezvousPod", rendezvous_pod},
              {"stages", stages_json},
              {"pods", pods_json},
              {"predicted",
               {{"iterationSeconds", iteration_seconds},
                {"tokensPerSecond", tokens_per_second},
                {"usdPerHour", usd_per_hour}}}};
  if (!megatron_args.empty()) out["megatronArgs"] = megatron_args;
  return out;
}

std::optional<std::int64_t> plan_integer(const Json& status, const char* field) {
  if (!status.is_object()) return std::nullopt;
  const auto plan = status.find("plan");
  if (plan == status.end() || !plan->is_object()) return std::nullopt;
  const auto value = plan->find(field);
  if (value == plan->end() || !value->is_number_integer()) return std::nullopt;
  return value->get<std::int64_t>();
}

std::int64_t plan_epoch_of(const Json& status) { return plan_integer(status, "epoch").value_or(0); }

double number_at(const Json& object, const Json::json_pointer& pointer) {
  if (!object.is_object() || !object.contains(pointer)) return 0;
  const Json& value = object.at(pointer);
  return value.is_number() ? value.get<double>() : 0;
}

std::optional<JobPlan> JobPlan::from_status(const Json& j, std::string* unreadable_why) {
  const auto unreadable = [&](const std::string& why) -> std::optional<JobPlan> {
    if (unreadable_why != nullptr) *unreadable_why = why;
    return std::nullopt;
  };
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) return unreadable("not an object");
  if (!j.contains("epoch")) return unreadable("no epoch");
  if (!j.contains("pods")) return unreadable("no pods");
  try {
    JobPlan p;
    p.epoch = j.at("epoch").get<std::int64_t>();
    p.gpus = j.value("gpus", 0);
    p.pp = j.value("pp", 1);
    p.dp = j.value("dp", 1);
    p.tp = j.value("tp", 1);
    p.micro_batch_size = j.value("microBatchSize", 1);
    p.micro_batches = j.value("microBatches", 1);
    p.virtual_shards = j.value("virtualShards", 1);
    p.partition = j.value("partition", "");
    p.rendezvous_pod = j.value("rendezvousPod", "");
    p.megatron_args = j.value("megatronArgs", std::vector<std::string>{});
    for (const Json& s : j.value("stages", Json::array()))
      p.stages.push_back({s.value("gpuType", ""), s.value("tp", 1), s.value("firstLayer", 0), s.value("lastLayer", 0),
                          s.value("pods", std::vector<std::string>{}), s.value("predictedPeakBytes", std::int64_t{0})});
    for (const Json& pod : j.at("pods"))
      p.pods.push_back({pod.value("name", ""), pod.value("node", ""), pod.value("gpuType", ""), pod.value("gpus", 0),
                        pod.value("ranks", std::vector<int>{}), pod.value("predictedPeakBytes", std::int64_t{0}),
                        pod.value("headroomBytes", std::int64_t{0})});
    const Json predicted = j.value("predicted", Json::object());
    p.iteration_seconds = predicted.value("iterationSeconds", 0.0);
    p.tokens_per_second = predicted.value("tokensPerSecond", 0.0);
    p.usd_per_hour = predicted.value("usdPerHour", 0.0);
    return p;
  } catch (const Json::exception& e) {
    return unreadable(e.what());
  }
}

std::optional<planner::ModelSpec> planner_model(const JobSpec& spec) {
  if (spec.model_spec) return inline_model(spec);
  return planner::find_preset(spec.model);
}

PlanOutcome plan_job(const JobSpec& spec, const planner::ClusterSpec& cluster, const PlanConstraints& limits,
                     const planner::EvalContext& context, std::int64_t epoch) {
  PlanOutcome outcome;
  const planner::PlaceRequest request = place_request(spec, limits);
  const planner::PlaceResult placed = planner::plan_and_place(request, cluster, context);
  if (!placed.ok()) {
    outcome.failure = placed.failure;
    outcome.reason = planner::to_string(placed.failure);
    outcome.message = placed.message;
    return outcome;
  }
  return plan_from_placed(spec, placed, limits, epoch);
}

PlanOutcome plan_from_placed(const JobSpec& spec, const planner::PlaceResult& placed, const PlanConstraints& limits,
                             std::int64_t epoch) {
  PlanOutcome outcome;
  std::optional<launch::MegatronLaunch> megatron;
  if (spec.worker_kind == WorkerKind::kMegatron) {
    auto rendered = render_job_launch(spec, placed);
    if (!rendered.ok()) {
      outcome.failure = planner::PlaceFailure::kConstraintsUnmet;
      outcome.reason = "MegatronCannotRun";
      outcome.message = "Megatron-LM cannot run the chosen plan: " + rendered.error();
      return outcome;
    }
    megatron = std::move(rendered).value();
  }
  JobPlan plan = to_job_plan(spec, placed, limits, epoch, megatron ? &*megatron : nullptr);
  if (spec.max_usd_per_hour && plan.usd_per_hour > *spec.max_usd_per_hour) {
    outcome.failure = planner::PlaceFailure::kConstraintsUnmet;
    outcome.reason = "OverBudget";
    outcome.message = "the best plan costs " + std::to_string(plan.usd_per_hour) +
                      " USD/h, over spec.budget.maxUsdPerHour " + std::to_string(*spec.max_usd_per_hour) +
                      "; raise the budget or allow cheaper GPU types";
    return outcome;
  }
  outcome.plan = std::move(plan);
  return outcome;
}

PodPlan pod_plan_for(const JobSpec& spec, const JobPlan& plan, const PlanPod& pod, std::int64_t barrier) {
  PodPlan p;
  p.job = spec.key();
  p.epoch = plan.epoch;
  p.barrier = barrier;
  p.worker_kind = spec.worker_kind == WorkerKind::kFlotilla ? "flotilla" : "megatron";
  p.model = spec.model;
  p.seed = spec.seed;
  p.global_batch_size = spec.global_batch_size;
  p.micro_batch_size = plan.micro_batch_size;
  p.virtual_shards = plan.virtual_shards;
  p.train_steps = spec.train_steps;
  p.world_size = plan.pp * plan.dp * plan.tp;
  p.pp = plan.pp;
  p.dp = plan.dp;
  p.tp = plan.tp;
  p.partition = plan.partition;
  p.data_path = spec.worker_data;
  p.checkpoint_dir = spec.checkpoint_path;
  p.checkpoint_every_steps = spec.checkpoint_interval_steps;
  p.loss_log = spec.checkpoint_path + "/loss.log";
  p.ranks = pod.ranks;
  p.rendezvous_pod = plan.rendezvous_pod;
  p.megatron_args = plan.megatron_args;
  p.max_local_restarts = spec.backoff_limit;  // a world in one pod restarts locally, within the same limit
  p.stop_grace_seconds = spec.stop_grace_seconds;
  return p;
}

std::string pod_name(const std::string& job, const std::string& node, int gpus) {
  return job + "-" + node + "-g" + std::to_string(gpus);
}

}  // namespace flotilla::op
