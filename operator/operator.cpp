#include "operator/operator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "kube/clock.h"
#include "operator/job_reconciler.h"
#include "operator/memory_error.h"
#include "operator/rescale_timing.h"
#include "operator/unavailable_nodes.h"
#include "planner/network_io.h"
#include "scaler/arrival_rate.h"

namespace flotilla::op {

const kube::Resource kTrainingJobs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::system_clock;

std::string now_rfc3339() { return kube::format_rfc3339(Clock::now()); }

// Seconds since the epoch of an RFC 3339 stamp (kube/clock.h parses it); 0 when unreadable.
double seconds_of(const std::string& rfc3339) { return kube::rfc3339_seconds(rfc3339).value_or(0); }

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::string job_key_of_pod(const Json& pod) {
  const std::string job = pod["metadata"].value("labels", Json::object()).value(kJobLabel, "");
  return job.empty() ? "" : pod["metadata"].value("namespace", "default") + "/" + job;
}

// What the kubelet or the scheduler says a Pending pod waits for (PodObservation::waiting_reason).
std::string waiting_reason_of(const Json& pod) {
  const auto reason_and_message = [](const Json& j) {
    const std::string reason = j.value("reason", ""), message = j.value("message", "");
    return message.empty() ? reason : reason.empty() ? message : reason + ": " + message;
  };
  const auto list = [](const Json& status, const char* field) {
    const auto it = status.find(field);
    return it != status.end() && it->is_array() ? *it : Json::array();
  };
  const auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return "";
  for (const Json& c : list(*status, "containerStatuses"))
    if (c.is_object())
      if (const Json waiting = c.value("/state/waiting"_json_pointer, Json()); waiting.is_object())
        if (std::string why = reason_and_message(waiting); !why.empty()) return why;
  for (const Json& c : list(*status, "conditions"))
    if (c.is_object() && c.value("type", "") == "PodScheduled" && c.value("status", "") == "False")
      return reason_and_message(c);
  return "";
}

PodObservation observe_pod(const Json& pod) {
  PodObservation p;
  p.name = pod["metadata"].value("name", "");
  p.node = pod.value("/spec/nodeName"_json_pointer, std::string());
  p.phase = pod.value("/status/phase"_json_pointer, std::string("Pending"));
  p.deleting = pod["metadata"].contains("deletionTimestamp");
  if (p.phase == "Pending") p.waiting_reason = waiting_reason_of(pod);
  p.created = pod["metadata"].value("creationTimestamp", "");
  const Json annotations = pod["metadata"].value("annotations", Json::object());
  if (annotations.contains(kPlanAnnotation) && annotations[kPlanAnnotation].is_string())
    if (auto plan = parse_pod_plan(annotations[kPlanAnnotation].get<std::string>());
        std::holds_alternative<PodPlan>(plan))
      p.plan = std::get<PodPlan>(plan);
  if (annotations.contains(kReportAnnotation) && annotations[kReportAnnotation].is_string())
    if (auto r = parse_pod_report(annotations[kReportAnnotation].get<std::string>());
        std::holds_alternative<PodReport>(r))
      p.report = std::get<PodReport>(r);
  return p;
}

std::string capacity_signature(const planner::ClusterSpec& capacity) {
  std::string sig;
  for (const planner::ClusterNode& n : capacity.nodes)
    sig += "|" + n.name + ":" + n.gpu_type + ":" + std::to_string(n.gpus);
  return sig;
}

// Whole capacity (not free) of healthy nodes: what a job could ever run on.
planner::ClusterSpec capacity_of(const ClusterView& view) {
  planner::ClusterSpec spec;
  for (const NodeView& n : view.nodes)
    if (n.healthy && !n.gpu_type.empty() && n.gpus > 0)
      spec.nodes.push_back({n.name, n.gpu_type, n.gpus, n.zone, n.zone});
  return spec;
}

// A new measurement replaces the folded one only when some GPU type's ratio moved by 10 % or
// more (or a type is new): step-to-step noise must not rebuild the job's table every report.
bool moved_enough(const std::vector<MeasuredRatio>& folded, const std::vector<MeasuredRatio>& measured) {
  constexpr double kRelativeChange = 0.10;
  if (folded.size() != measured.size()) return true;
  for (const MeasuredRatio& r : measured) {
    auto it = std::find_if(folded.begin(), folded.end(), [&](const MeasuredRatio& f) { return f.gpu_type == r.gpu_type; });
    if (it == folded.end()) return true;
    if (std::abs(r.forward / it->forward - 1) >= kRelativeChange || std::abs(r.backward / it->backward - 1) >= kRelativeChange)
      return true;
  }
  return false;
}

// λ over (now - window, now] of the jobs created then (FlexTrain §5.1), through the scaler's
// estimator so the operator and the simulator count arrivals the same way.
double arrival_rate_per_s(const std::vector<double>& arrival_times_s, double window_s, double now) {
  scaler::ArrivalRateEstimator arrivals(window_s, 1);
  for (double t : arrival_times_s) arrivals.record(t, 1);
  return arrivals.rate_per_s(now);
}

const char* direction_of(scaler::AllocAction a) {
  switch (a) {
    case scaler::AllocAction::kGrow: return "up";
    case scaler::AllocAction::kShrink: return "down";
    case scaler::AllocAction::kAdmit: return "admit";
    case scaler::AllocAction::kRequeue: return "requeue";
    default: return "";
  }
}

}  // namespace

Operator::Operator(std::shared_ptr<kube::Client> client, OperatorOptions options, Metrics& metrics)
    : client_(std::move(client)),
      options_(std::move(options)),
      metrics_(metrics),
      api_errors_(metrics),
      catalog_(planner::builtin_gpu_catalog()),
      compute_(nullptr),
      network_(planner::default_network_model()),
      events_(client_, kube::EventSource{"flotilla-operator", ""}) {
  if (!options_.catalog_override_yaml.empty()) {
    auto c = planner::apply_catalog_override(catalog_, options_.catalog_override_yaml);
    if (c) catalog_ = std::move(c.value());
  }
  eval_.catalog = &catalog_;
  eval_.compute = &compute_;
  eval_.network = &network_;
}

bool Operator::run(std::stop_token stop) {
  kube::Controller controller(
      client_, kTrainingJobs, options_.ns,
      [this](const std::string& key, const kube::ReconcileContext& ctx) { return reconcile(key, ctx); });
  const std::string scope = options_.ns.empty() ? " in all namespaces" : " in " + options_.ns;
  auto reporting = [this](std::string request) {
    kube::WatcherOptions o;
    o.on_request_failed = [this, request](const kube::Error& e) { api_errors_.report(request, e); };
    return o;
  };
  controller.with_watcher_options(reporting("list/watch trainingjobs" + scope))
      .owns(kube::resources::pods, reporting("list/watch pods" + scope))
      .watches(
          kube::resources::nodes, [](const Json&) { return std::vector<std::string>{}; },
          reporting("list/watch nodes"))
      .with_cluster_pass();
  controller_ = &controller;
  ready_ = true;
  const bool synced = controller.run(stop);
  ready_ = false;
  controller_ = nullptr;
  return synced;
}

kube::Result<kube::Action> Operator::reconcile(const std::string& key, const kube::ReconcileContext& ctx) {
  const auto start = std::chrono::steady_clock::now();
  const bool cluster = key == kube::cluster_pass_key();
  kube::Result<kube::Action> result = kube::Action::await_change();
  if (cluster)
    cluster_pass(ctx);
  else
    result = reconcile_one(key, ctx);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string kind = cluster ? "cluster" : "job";
  metrics_.inc("flotilla_reconcile_total", {{"kind", kind}, {"result", result.ok() ? "ok" : "error"}});
  metrics_.observe("flotilla_reconcile_duration_seconds", {{"kind", kind}}, seconds);
  return result;
}

const planner::EvalContext& Operator::eval_for(const std::string& key) const {
  auto m = measured_.find(key);
  return m != measured_.end() && m->second.compute ? m->second.eval : eval_;
}

std::shared_ptr<const Operator::Snapshot> Operator::snapshot(const kube::ReconcileContext& ctx) {
  const std::string nodes_version = ctx.watched[0].resource_version();
  const std::string pods_version = ctx.owned[0].resource_version();
  const std::string jobs_version = ctx.primary.resource_version();  // their plans take GPUs (cluster_view.h)
  std::shared_ptr<const Snapshot> previous;
  {
    std::lock_guard lock(mu_);
    if (snapshot_ && snapshot_->nodes_version == nodes_version && snapshot_->pods_version == pods_version &&
        snapshot_->jobs_version == jobs_version)
      return snapshot_;
    previous = snapshot_;
  }
  // The versions were read before the visits: a change in between only makes the next call
  // rebuild. The caches are visited in place (no copy of 1,000 nodes and pods per rebuild).
  auto next = std::make_shared<Snapshot>();
  next->nodes_version = nodes_version;
  next->pods_version = pods_version;
  next->jobs_version = jobs_version;
  const bool same_nodes = previous && previous->nodes_version == nodes_version && !nodes_version.empty();
  if (same_nodes && previous->pods_version == pods_version && !pods_version.empty()) {
    // Only jobs moved (a status write): keep what pods hold, read the plans again.
    next->view = previous->view;
    next->pods = previous->pods;
    clear_plans(next->view);
    ctx.primary.for_each([&](const Json& job) {
      add_job_plan_to_view(next->view, job);
      next->claims.add(job);
    });
    std::lock_guard lock(mu_);
    snapshot_ = next;
    return next;
  }
  if (same_nodes) {
    // Only pods or jobs moved: keep the nodes, recount what pods hold and plans take.
    next->view.nodes = previous->view.nodes;
    next->view.index_by_name = previous->view.index_by_name;
    for (NodeView& n : next->view.nodes) {
      n.held_by_job.clear();
      n.staying_by_job_epoch.clear();
      n.planned_by_job.clear();
      n.leaving_due.clear();
    }
  } else {
    ctx.watched[0].for_each([&](const Json& node) { add_node_to_view(next->view, node, catalog_); });
  }
  ctx.primary.for_each([&](const Json& job) {
    add_job_plan_to_view(next->view, job);
    next->claims.add(job);
  });
  auto pods = std::make_shared<PodIndex>();
  const PodIndex* seen_before = previous ? previous->pods.get() : nullptr;
  ctx.owned[0].for_each([&](const Json& pod) {
    const std::string job = job_key_of_pod(pod);
    if (job.empty()) {
      add_pod_to_view(next->view, pod, kJobLabel, kUnknownEpoch);  // not a job's: held as it stands
      return;
    }
    const Json& meta = pod["metadata"];
    const std::string key = meta.value("namespace", "") + "/" + meta.value("name", "");
    const std::string version = meta.value("resourceVersion", "");
    const PodObservation* seen = nullptr;
    if (seen_before != nullptr && !version.empty())
      if (auto it = seen_before->observed.find(key); it != seen_before->observed.end() && it->second.first == version)
        seen = &it->second.second;
    auto& entry = pods->observed[key] = {version, seen != nullptr ? *seen : observe_pod(pod)};
    const PodObservation& observed = entry.second;
    add_pod_to_view(next->view, pod, kJobLabel, observed.plan ? observed.plan->epoch : kUnknownEpoch);
    pods->by_job[job].push_back(observed);
  });
  next->pods = std::move(pods);
  std::lock_guard lock(mu_);
  snapshot_ = next;
  return next;
}

// Called with mu_ held, after the pass set tables_capacity_. A job with a measured profile has its
// own table: the profile is the job's (measured_profile.h), not its template's.
const JobTable& Operator::table_for(const JobSpec& spec, const Json& status) {
  std::string key = job_table_key(spec);
  if (auto m = measured_.find(spec.key()); m != measured_.end() && m->second.compute)
    key += "|measured:" + spec.key() + ":" + m->second.signature;
  // Memory headroom the job's workers taught it (memory_headroom.h) is the job's own too.
  MemoryHeadroom headroom = MemoryHeadroom::from_status(status);
  headroom.keep_only(headroom_key(spec));  // the reconcile drops the rest from status too
  if (!headroom.empty()) key += "|headroom:" + spec.key() + ":" + headroom.signature();
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    planner::EvalContext eval = eval_for(spec.key());
    planner::GpuCatalog catalog;
    if (!headroom.empty()) {
      catalog = with_headroom(*eval.catalog, headroom);
      eval.catalog = &catalog;
    }
    it = tables_.emplace(key, build_job_table(spec, pass_capacity_, eval)).first;
  }
  pass_tables_used_.insert(key);
  return it->second;
}

void Operator::update_measured_profile(const Json& job, const JobObservation& obs) {
  // Steps of an epoch before this many past its first report are warm-up (thread start, first
  // allocations, a restored checkpoint being read) and are not folded.
  constexpr std::int64_t kWarmupSteps = 3;
  if (obs.status.value("phase", "") != "Running") return;
  const auto plan = JobPlan::from_status(obs.status.value("plan", Json()));
  const auto model = planner_model(obs.spec);
  if (!plan || !model) return;
  std::vector<PodReport> reports;
  std::int64_t lowest = -1, highest = -1;
  for (const PodObservation& p : obs.pods) {
    if (!p.report || p.report->epoch != plan->epoch) continue;
    reports.push_back(*p.report);
    lowest = lowest < 0 ? p.report->step : std::min(lowest, p.report->step);
    highest = std::max(highest, p.report->step);
  }
  if (reports.empty()) return;
  std::optional<MeasuredProfile> folded;
  {
    std::lock_guard lock(mu_);
    MeasuredCompute& m = measured_[obs.spec.key()];
    if (m.epoch != plan->epoch) {
      m.epoch = plan->epoch;
      m.first_step = lowest;
    }
    if (highest < m.first_step + kWarmupSteps) return;
    // Ratios every reconcile (O(stages)); profiles (O(types x blocks)) only when they moved.
    auto ratios = measure_ratios(*model, *plan, reports, compute_, catalog_);
    if (!ratios || !moved_enough(m.ratios, *ratios)) return;
    folded = fold_ratios(*model, *plan, std::move(*ratios), compute_, catalog_);
    m.signature = folded->signature;
    m.ratios = folded->ratios;
    m.profiles = std::make_unique<planner::ProfileSet>();
    for (planner::GpuProfile& p : folded->profiles) m.profiles->add(std::move(p));
    m.compute = std::make_unique<planner::ComputeModel>(m.profiles.get());
    m.eval = eval_;
    m.eval.compute = m.compute.get();
  }
  record_event(job, "Normal", "Profiled", folded->summary + "; the job's next plans are timed with it");
  if (controller_ != nullptr) controller_->queue().add(kube::cluster_pass_key());  // its table changes
}

// A pod of the job carries a plan epoch above the job's status as this pass read it: the job
// cache has not caught up with the job's last status write (a separate watch from the pods').
// Judged on the older status, the job would read as waiting while its new pods take GPUs, or
// as running where it no longer is; the pass that the job cache's update queues judges it.
bool pods_ahead_of_status(const std::map<std::string, std::vector<PodObservation>>& pods_by_job, const std::string& key,
                          const Json& status) {
  auto it = pods_by_job.find(key);
  if (it == pods_by_job.end()) return false;
  const std::int64_t epoch = plan_epoch_of(status);
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const PodObservation& p) { return !p.deleting && p.plan && p.plan->epoch > epoch; });
}

void Operator::cluster_pass(const kube::ReconcileContext& ctx) {
  const std::vector<Json> jobs = ctx.primary.list();
  const std::shared_ptr<const Snapshot> snap = snapshot(ctx);
  // The jobs the pass allocates for and the GPUs their plans take come from one read of the job
  // cache (the snapshot's may be older or newer than `jobs`): else a job admitted in between
  // reads as waiting while its plan takes GPUs, or as running on GPUs that read as free.
  const ClusterView view = with_plans_of(snap->view, jobs);
  std::vector<double> arrival_times_s;  // every job's creation, for λ over each job's own window
  std::vector<double> job_window_s;     // per input.jobs entry: spec.elasticity.windowSeconds
  scaler::AllocatorInput input;
  input.free_gpus_by_type = view.free_by_type();
  const std::map<std::string, int>& free_by_type = input.free_gpus_by_type;
  input.use_benefit_check = options_.use_benefit_check;
  input.allow_preemption = options_.allow_preemption;
  std::map<std::string, std::int64_t> basis_epoch;  // the plan epoch each decision was made on
  const std::string pass_now = now_rfc3339();
  std::lock_guard lock(mu_);
  pass_capacity_ = capacity_of(view);
  if (const std::string capacity = capacity_signature(pass_capacity_); capacity != tables_capacity_) {
    tables_.clear();
    tables_capacity_ = capacity;
  }
  pass_tables_used_.clear();
  for (const Json& job : jobs) {
    auto parsed = parse_job_spec(job, options_.policy);
    if (!std::holds_alternative<JobSpec>(parsed)) continue;
    const JobSpec spec = std::get<JobSpec>(parsed);
    const Json status = job.value("status", Json::object());
    const std::string phase = status.value("phase", "");
    const double created = seconds_of(spec.creation_timestamp);
    arrival_times_s.push_back(created);
    if (phase == "Succeeded" || phase == "Failed") continue;
    if (pods_ahead_of_status(snap->pods->by_job, spec.key(), status)) continue;
    std::optional<JobPlan> plan = JobPlan::from_status(status.value("plan", Json()));
    if (plan && plan->pods.empty()) plan.reset();  // requeued: not running
    // A job waiting for a checkpoint folder another job owns is not admitted (its reconcile
    // says why); one already running keeps its GPUs.
    if (!plan && !snap->claims.owner_of(spec).empty()) continue;
    const JobTable& table = table_for(spec, status);
    scaler::AllocatorJob a;
    a.key = spec.key();
    a.priority = spec.priority;
    a.arrival_order = static_cast<std::int64_t>(created * 1000);
    a.elastic = spec.elasticity != ElasticityMode::kOff;
    a.initial_gpus = table.initial_gpus;
    a.fits_nowhere_why = table.why_not;
    a.fits_nowhere_reason = table.why_not_reason;
    a.table = table.initial_gpus > 0 ? &table.table : nullptr;
    a.gpu_types = spec.gpu_types;
    for (std::string& t : a.gpu_types)
      if (const planner::GpuType* g = catalog_.find(t)) t = g->name;
    for (const std::string& name : UnavailableNodes::from_status(status, pass_now).names())
      if (const NodeView* n = view.find(name); n != nullptr && n->healthy && !n->gpu_type.empty())
        a.unusable_free_gpus_by_type[n->gpu_type] += view.free_on(*n);
    a.overhead_s = options_.restart_overhead_s;
    a.min_rescale_interval_s = spec.min_rescale_interval_seconds;
    a.benefit_threshold = spec.benefit_threshold;
    basis_epoch[spec.key()] = plan_epoch_of(status);
    if (plan) {
      a.running = true;
      a.current_gpus = plan->gpus;
      a.remaining_s = remaining_train_seconds(*plan, spec.train_steps, status.value("progress", Json::object()));
      std::map<std::string, const PodObservation*> job_pods;  // by name
      if (auto it = snap->pods->by_job.find(spec.key()); it != snap->pods->by_job.end())
        for (const PodObservation& p : it->second) job_pods[p.name] = &p;
      int alive = 0;
      for (const PlanPod& pod : plan->pods) {
        const NodeView* node = view.find(pod.node);
        bool pod_alive = node != nullptr && node->healthy;
        // Deleting is not lost: the operator deletes pods itself during a rescale, and this
        // pass may see that before the job's new status. A failed pod of an older epoch is the
        // old incarnation of one this plan replaces.
        if (auto it = job_pods.find(pod.name); it != job_pods.end())
          pod_alive =
              pod_alive && (it->second->phase != "Failed" || it->second->plan.value_or(PodPlan{}).epoch < plan->epoch);
        if (pod_alive) alive += pod.gpus;
      }
      a.gpus_alive = alive;
      if (const Json declined = status.value("declinedScaleUp", Json()); declined.is_object())
        a.may_grow = declined.value("epoch", std::int64_t{-1}) != plan->epoch ||
                     declined.value("freeGpus", Json()) != Json(free_by_type);
      if (status.contains("lastRescaleTime"))
        a.seconds_since_rescale = now_s() - seconds_of(status.value("lastRescaleTime", ""));
    }
    input.jobs.push_back(a);
    job_window_s.push_back(spec.window_seconds);
  }
  std::erase_if(tables_, [&](const auto& entry) { return !pass_tables_used_.contains(entry.first); });
  // λ once per distinct window: jobs mostly share the operator's, and each count walks every job.
  const double now = now_s();
  std::map<double, double> rate_by_window_s;
  const auto rate_over = [&](double window_s) {
    auto [it, added] = rate_by_window_s.try_emplace(window_s, 0.0);
    if (added) it->second = arrival_rate_per_s(arrival_times_s, window_s, now);
    return it->second;
  };
  input.arrival_rate_per_s = rate_over(options_.arrival_window_s);
  for (std::size_t i = 0; i < input.jobs.size(); ++i)
    if (job_window_s[i] != options_.arrival_window_s) input.jobs[i].arrival_rate_per_s = rate_over(job_window_s[i]);
  const std::vector<scaler::AllocatorDecision> decisions = scaler::allocate(input);
  int waiting = 0;
  for (const scaler::AllocatorDecision& d : decisions) {
    if (d.action == scaler::AllocAction::kWait) ++waiting;
    auto old = decisions_.find(d.key);
    const bool changed = old == decisions_.end() || old->second.first.action != d.action ||
                         old->second.first.target_gpus != d.target_gpus ||
                         old->second.first.reason_code != d.reason_code || old->second.second != basis_epoch[d.key];
    if (changed) {
      if (const char* dir = direction_of(d.action); *dir)
        metrics_.inc("flotilla_scaling_decisions_total", {{"direction", dir}, {"reason", d.reason_code}});
      if (d.reason_code == "Preempted") metrics_.inc("flotilla_preemptions_total");
      if (d.benefit)
        metrics_.inc("flotilla_benefit_checks_total", {{"result", d.benefit->scale_up ? "pass" : "refuse"}});
      if (controller_ != nullptr) controller_->queue().add(d.key);
    }
    decisions_[d.key] = {d, basis_epoch[d.key]};
  }
  metrics_.set("flotilla_queue_depth", {}, waiting);
  record_metrics(jobs, *snap);
}

void Operator::record_metrics(const std::vector<Json>& jobs, const Snapshot& snap) {
  std::map<Labels, double> phases;
  double predicted = 0, measured = 0, oldest_rescale_s = 0;
  std::optional<double> memory_error;
  const double now = now_s();
  const ClusterView& view = snap.view;
  for (const Json& job : jobs) {
    const Json status = job.value("status", Json::object());
    oldest_rescale_s = std::max(oldest_rescale_s, rescaling_age_seconds(status, now));
    const std::string phase = status.value("phase", "Pending");
    phases[{{"phase", phase.empty() ? "Pending" : phase}}] += 1;
    if (phase != "Running") continue;
    predicted += number_at(status, "/plan/predicted/tokensPerSecond"_json_pointer);
    measured += number_at(status, "/progress/tokensPerSecond"_json_pointer);
    const std::string key = job["metadata"].value("namespace", "default") + "/" + job["metadata"].value("name", "");
    if (auto plan = JobPlan::from_status(status.value("plan", Json())))
      if (auto it = snap.pods->by_job.find(key); it != snap.pods->by_job.end())
        if (auto e = memory_prediction_error(*plan, it->second))
          memory_error = std::max(memory_error.value_or(0.0), *e);
  }
  metrics_.replace_family("flotilla_jobs", phases);
  std::map<Labels, double> gpus;
  for (const NodeView& n : view.nodes) {
    const std::string type = n.gpu_type.empty() ? "unknown" : n.gpu_type;
    if (!n.healthy) {
      gpus[{{"type", type}, {"state", "unhealthy"}}] += n.gpus;
      continue;
    }
    gpus[{{"type", type}, {"state", "allocated"}}] += n.held();
    gpus[{{"type", type}, {"state", "free"}}] += std::max(0, n.gpus - n.held());
  }
  metrics_.replace_family("flotilla_gpus", gpus);
  metrics_.set("flotilla_predicted_tokens_per_second", {}, predicted);
  metrics_.set("flotilla_measured_tokens_per_second", {}, measured);
  metrics_.set("flotilla_rescaling_oldest_seconds", {}, oldest_rescale_s);
  // No series until a worker has measured: a 0 would claim a perfect prediction.
  std::map<Labels, double> memory;
  if (memory_error) memory[{}] = *memory_error;
  metrics_.replace_family("flotilla_memory_prediction_error_ratio", memory);
}

kube::Result<kube::Action> Operator::reconcile_one(const std::string& key, const kube::ReconcileContext& ctx) {
  const auto job = ctx.primary.get(key);
  if (!job) {
    std::lock_guard lock(mu_);
    decisions_.erase(key);  // its table goes with the next pass if no other job shares it
    measured_.erase(key);
    barrier_lifted_at_s_.erase(key);
    expectations_.forget(key);
    api_errors_.recovered("update trainingjobs/status of " + key);
    return kube::Action::await_change();  // its pods go with it (ownerReferences)
  }
  JobObservation obs;
  auto parsed = parse_job_spec(*job, options_.policy);
  Json status = job->value("status", Json::object());
  if (auto* error = std::get_if<std::string>(&parsed)) {
    Json next = status;
    next["phase"] = next.value("phase", "").empty() ? "Pending" : next["phase"];
    const std::int64_t generation = (*job)["metadata"].value("generation", 0);
    next["observedGeneration"] = generation;
    set_condition(next, "Planned", false, "InvalidSpec", *error, generation, now_rfc3339());
    if (next != status) {
      Json updated = *job;
      updated["status"] = next;
      auto r = client_->update_status(kTrainingJobs, (*job)["metadata"].value("namespace", ""), updated);
      if (!r) return report_status_write(key, r.error());
    }
    return kube::Action::await_change();
  }
  obs.spec = std::get<JobSpec>(parsed);
  obs.status = status;
  const std::shared_ptr<const Snapshot> snap = snapshot(ctx);
  if (auto it = snap->pods->by_job.find(key); it != snap->pods->by_job.end()) obs.pods = it->second;
  obs.cluster = &snap->view;
  obs.checkpoint_owner = snap->claims.owner_of(obs.spec);
  obs.checkpoint_shared_with = snap->claims.other_claimant(obs.spec);
  obs.now = now_rfc3339();
  {
    std::lock_guard lock(mu_);
    // The pod cache has not seen this job's last creates or deletes yet: acting on it would
    // take a just-created pod for missing (pod_expectations.h). Its watch event is near.
    if (!expectations_.satisfied(key, obs.pods, now_s())) return kube::Action::requeue_after(std::chrono::milliseconds(100));
    // A decision made on another epoch than the status now says (the caches of jobs and pods
    // are separate watches) is not acted on: the next cluster pass decides again.
    const std::int64_t epoch = plan_epoch_of(status);
    if (auto d = decisions_.find(key); d != decisions_.end() && d->second.second == epoch)
      obs.decision = d->second.first;
    else if (controller_ != nullptr)
      controller_->queue().add(kube::cluster_pass_key());
  }
  update_measured_profile(*job, obs);
  const JobActions actions = reconcile_job(obs, eval_for(key));
  if (actions.status) {
    Json updated = *job;
    updated["status"] = *actions.status;
    auto r = client_->update_status(kTrainingJobs, obs.spec.ns, updated);
    if (!r) return report_status_write(key, r.error());  // Conflict: retried with backoff on fresh caches
    api_errors_.recovered("update trainingjobs/status of " + key);
    observe_rescale(key, status, *actions.status);
  }
  apply(obs.spec, *job, actions);
  {
    std::vector<std::string> created;
    for (const PodCreate& c : actions.create) created.push_back(c.pod.name);
    std::lock_guard lock(mu_);
    expectations_.expect(key, created, actions.remove, now_s());
  }
  const std::string phase = actions.status ? actions.status->value("phase", "") : status.value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return kube::Action::await_change();
  if (actions.requeue_after_seconds && *actions.requeue_after_seconds < 5)  // a relaunch's backoff ends sooner
    return kube::Action::requeue_after(std::chrono::milliseconds(
        static_cast<std::int64_t>(std::ceil(*actions.requeue_after_seconds * 1000))));
  return kube::Action::requeue_after(std::chrono::seconds(5));
}

void Operator::observe_rescale(const std::string& key, const Json& before, const Json& after) {
  std::lock_guard lock(mu_);
  const double now = now_s();
  auto lifted = barrier_lifted_at_s_.find(key);
  const RescaleTiming t =
      time_rescale(before, after, now, lifted == barrier_lifted_at_s_.end() ? 0 : lifted->second);
  if (t.barrier_lifted) barrier_lifted_at_s_[key] = now;
  for (const auto& [phase, seconds] : t.observations)
    metrics_.observe("flotilla_rescale_duration_seconds", {{"phase", phase}}, seconds);
  if (after.value("phase", "") != "Rescaling") barrier_lifted_at_s_.erase(key);
}

kube::Error Operator::report_status_write(const std::string& key, const kube::Error& error) {
  if (!error.is(kube::ErrorKind::Conflict))  // a Conflict is optimistic concurrency at work
    api_errors_.report("update trainingjobs/status of " + key, error);
  return error;
}

void Operator::apply(const JobSpec& spec, const Json& job, const JobActions& actions) {
  const std::string in = " in " + spec.ns;
  for (const std::string& name : actions.remove) {
    auto r = client_->remove(kube::resources::pods, spec.ns, name);
    if (!r && !r.is(kube::ErrorKind::NotFound)) api_errors_.report("delete pods" + in, r.error());  // NotFound: gone
  }
  for (const PodCreate& c : actions.create) {
    auto r = client_->create(kube::resources::pods, spec.ns, pod_manifest(spec, c.pod, c.plan, options_.pod_template));
    if (!r && !r.is(kube::ErrorKind::AlreadyExists)) {
      api_errors_.report("create pods" + in, r.error());
      record_event(job, "Warning", "PodCreateFailed", c.pod.name + ": " + r.error().message);
    }
  }
  for (const auto& [name, plan] : actions.annotate) {
    Json patch = {{"metadata", {{"annotations", {{kPlanAnnotation, encode_pod_plan(plan)}}}}}};
    auto r = client_->patch(kube::resources::pods, spec.ns, name, kube::PatchType::Merge, patch);
    if (!r && !r.is(kube::ErrorKind::NotFound)) api_errors_.report("patch pods" + in, r.error());
  }
  for (const JobEvent& e : actions.events) {
    // One OutOfMemory event per plan whose workers ran out (the rescale's; memory_headroom.h).
    if (e.reason == "OutOfMemory") metrics_.inc("flotilla_worker_out_of_memory_total");
    if (e.reason == "PodStartTimeout") metrics_.inc("flotilla_pod_start_timeouts_total");
    record_event(job, e.type, e.reason, e.message);
  }
}

void Operator::record_event(const Json& job, const std::string& type, const std::string& reason,
                            const std::string& message) {
  // The operator's log tells the same story as `kubectl get events` (one line per decision), so
  // `kubectl logs` of the operator explains it after the events have expired (1 h by default).
  const Json& meta = job["metadata"];
  std::fprintf(stderr, "flotilla-operator: %s/%s %s %s: %s\n", meta.value("namespace", "").c_str(),
               meta.value("name", "").c_str(), type.c_str(), reason.c_str(), message.c_str());
  std::fflush(stderr);
  auto r = events_.record(job, type, reason, message);
  if (!r) api_errors_.report("create/patch events in " + job["metadata"].value("namespace", ""), r.error());
}

}  // namespace flotilla::op
