#include "operator/job_reconciler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "kube/clock.h"
#include "operator/crash_loop.h"
#include "operator/decision_history.h"
#include "operator/memory_headroom.h"
#include "operator/unavailable_nodes.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

bool live(const PodObservation& p, const ClusterView& cluster) {
  if (p.deleting || p.phase == "Failed") return false;
  const NodeView* node = cluster.find(p.node);
  return p.node.empty() || (node != nullptr && node->healthy);
}

// Its processes run or are about to: not being deleted, not Succeeded or Failed.
bool still_running(const PodObservation& p) { return !p.deleting && p.phase != "Succeeded" && p.phase != "Failed"; }

// The plan annotation of the highest epoch among the job's pods (what its workers were last
// launched with); null when no pod carries one.
const PodPlan* newest_pod_plan(const JobObservation& job) {
  const PodPlan* newest = nullptr;
  for (const PodObservation& p : job.pods)
    if (p.plan && (newest == nullptr || p.plan->epoch > newest->epoch)) newest = &*p.plan;
  return newest;
}

const PodObservation* find_pod(const JobObservation& job, const std::string& name) {
  for (const PodObservation& p : job.pods)
    if (p.name == name) return &p;
  return nullptr;
}

bool report_is(const PodObservation* p, std::int64_t epoch, std::initializer_list<PodState> states) {
  if (p == nullptr || !p->report || p->report->epoch != epoch) return false;
  return std::find(states.begin(), states.end(), p->report->state) != states.end();
}

// A pod whose processes have ended without finishing `epoch`: Failed, or Succeeded under an
// earlier epoch (its sidecar exited before it read the new plan, e.g. the job's last step came
// just as trainSteps was raised). Its sidecar reads no plan any more, so it is deleted and
// created again; one that finished `epoch` itself (its report says so) is done, not ended.
bool ended_before(const PodObservation& p, std::int64_t epoch) {
  if (p.deleting) return false;
  return p.phase == "Failed" || (p.phase == "Succeeded" && !report_is(&p, epoch, {PodState::kSucceeded}));
}

void write_decision(Json& status, const scaler::AllocatorDecision& d, std::int64_t epoch, const std::string& now) {
  ScalingDecision entry{.action = scaler::to_string(d.action), .reason = d.reason, .epoch = epoch, .time = now};
  if (d.benefit) {
    entry.has_benefit = true;
    entry.arrival_rate_per_s = d.benefit->arrival_rate_per_s;
    entry.speedup = d.benefit->speedup;
    entry.overhead_s = d.benefit->overhead_s;
    entry.required_idle_s = d.benefit->required_idle_s;
    entry.probability = d.benefit->probability;
    entry.threshold = d.benefit->threshold_probability;
  }
  record_decision(status, entry);
}

// Progress from the pods' reports for the current epoch (or any epoch, for the step).
void fold_progress(const JobObservation& job, Json& status) {
  Json progress = status.value("progress", Json::object());
  std::int64_t step = progress.value("step", std::int64_t{0});
  std::int64_t checkpoint = progress.value("lastCheckpointStep", std::int64_t{-1});
  for (const PodObservation& p : job.pods) {
    if (!p.report) continue;
    const PodReport& r = *p.report;
    if (r.step >= step && r.step > 0) {
      step = r.step;
      // A pod that only resumed (a finished checkpoint: nothing left to train) reports the step
      // but measured no loss or speed: tokens/s > 0 marks a measured step.
      if (r.tokens_per_second > 0) {
        progress["loss"] = r.loss;
        // One decimal: `kubectl get tj` prints a number column with every digit it has
        // (2560.739170165164), and a tenth of a token per second is below the measurement's noise.
        progress["tokensPerSecond"] = std::round(r.tokens_per_second * 10) / 10;
      }
    }
    checkpoint = std::max(checkpoint, r.last_checkpoint_step);
  }
  progress["step"] = step;
  progress["lastCheckpointStep"] = checkpoint;
  status["progress"] = progress;
}

struct Context {
  const JobObservation& job;
  const planner::EvalContext& base_eval;  // the operator's, without the job's memory headroom
  Json status;
  JobActions actions;
  MemoryHeadroom headroom;               // status.memoryHeadroom, parsed once per reconcile
  planner::GpuCatalog headroom_catalog;  // base_eval's catalog plus `headroom`
  planner::EvalContext eval;             // what the job is planned with
  UnavailableNodes unavailable;          // status.unavailableNodes not yet expired: left out of plans
  // The spec with what the job's checkpoint pins kept as launched, while a change to it is
  // refused (hold_pinned_fields()); unset when the workers can run the spec as it is.
  std::optional<JobSpec> held;
};

// The spec the job is planned and launched with: the user's, or its held form.
const JobSpec& spec_of(const Context& c) { return c.held ? *c.held : c.job.spec; }

// The job is planned with the headroom its workers taught it (memory_headroom.h): `eval`
// carries `headroom`.
void plan_with(Context& c, MemoryHeadroom headroom) {
  c.headroom = std::move(headroom);
  c.eval = c.base_eval;
  if (c.headroom.empty() || c.base_eval.catalog == nullptr) return;
  c.headroom_catalog = with_headroom(*c.base_eval.catalog, c.headroom);
  c.eval.catalog = &c.headroom_catalog;
}

// New headroom: the status keeps it, and the job is planned with it.
void set_headroom(Context& c, MemoryHeadroom headroom) {
  if (headroom.empty())
    c.status.erase("memoryHeadroom");
  else
    c.status["memoryHeadroom"] = headroom.to_status();
  plan_with(c, std::move(headroom));
}

// The status's headroom; what was learned for another model or worker kind does not hold for
// this spec and leaves the status.
void load_headroom(Context& c) {
  MemoryHeadroom headroom = MemoryHeadroom::from_status(c.status);
  if (headroom.keep_only(headroom_key(spec_of(c))))
    set_headroom(c, std::move(headroom));
  else
    plan_with(c, std::move(headroom));
}

void set_unavailable(Context& c, UnavailableNodes nodes) {
  if (nodes.empty())
    c.status.erase("unavailableNodes");
  else
    c.status["unavailableNodes"] = nodes.to_status();
  c.unavailable = std::move(nodes);
}

// The status's unavailable nodes; expired or malformed entries leave the status.
void load_unavailable(Context& c) {
  UnavailableNodes nodes = UnavailableNodes::from_status(c.status, c.job.now);
  if (c.status.contains("unavailableNodes") && c.status["unavailableNodes"] != nodes.to_status())
    set_unavailable(c, std::move(nodes));
  else
    c.unavailable = std::move(nodes);
}

void phase(Context& c, const std::string& p) { c.status["phase"] = p; }
void condition(Context& c, const std::string& type, bool v, const std::string& reason, const std::string& message) {
  set_condition(c.status, type, v, reason, message, c.job.spec.generation, c.job.now);
}
// The status's condition of `type` (set_condition() keeps one per type), or an empty object.
Json condition_of(const Json& status, const std::string& type) {
  for (const Json& cond : status.value("conditions", Json::array()))
    if (cond.value("type", "") == type) return cond;
  return Json::object();
}
// True when the status's condition of `type` already says exactly this.
bool condition_says(const Context& c, const std::string& type, bool v, const std::string& reason,
                    const std::string& message) {
  const Json cond = condition_of(c.status, type);
  return cond.value("status", "") == (v ? "True" : "False") && cond.value("reason", "") == reason &&
         cond.value("message", "") == message;
}

// True when the condition of `type` is True and was set under an older spec generation (the
// user re-applied a changed spec since the job Failed or Succeeded).
bool true_before_generation(const Json& status, const std::string& type, std::int64_t generation) {
  const Json cond = condition_of(status, type);
  return cond.value("status", "") == "True" && cond.value("observedGeneration", std::int64_t{0}) < generation;
}
void event(Context& c, const std::string& type, const std::string& reason, const std::string& message) {
  c.actions.events.push_back({type, reason, message});
}

// Condition `type` False with `reason` and `message`, and a Warning event of that reason only
// when the condition did not already say it: a reconcile repeats every few seconds.
void refuse_with_condition(Context& c, const std::string& type, const std::string& reason, const std::string& message) {
  const bool repeated = condition_says(c, type, false, reason, message);
  condition(c, type, false, reason, message);
  if (!repeated) event(c, "Warning", reason, message);
}

// A new pod is created only once its node has the GPUs free (the kubelet refuses a pod that does
// not fit, e.g. while the job's old pod there still terminates); the deletion's watch event
// reconciles again and creates it then.
struct NodeRoom {
  const ClusterView& cluster;
  std::map<std::string, int> taken;
  bool take(const PlanPod& pod) {
    const NodeView* node = cluster.find(pod.node);
    if (node == nullptr || !node->healthy) return false;
    if (node->gpus - node->held() - taken[pod.node] < pod.gpus) return false;
    taken[pod.node] += pod.gpus;
    return true;
  }
};

// status.plan without pods or GPUs (requeued, failed, or to be admitted again): it keeps its
// epoch, micro-batch and shards, which the next admission resumes under.
void drop_plan_pods(Context& c) {
  if (!c.status.contains("plan") || !c.status["plan"].is_object()) return;
  c.status["plan"]["pods"] = Json::array();
  c.status["plan"]["gpus"] = 0;
}

// Deletes every pod of the job that is not already going.
void delete_all_pods(Context& c) {
  for (const PodObservation& p : c.job.pods)
    if (!p.deleting && p.phase != "Succeeded") c.actions.remove.push_back(p.name);
}

// Failed for good: the pods go, the condition says why and what to fix.
void fail_job(Context& c, const std::string& reason, const std::string& why) {
  std::string message = why;
  // What the job learned about memory stays, and a re-applied spec plans with it: say so.
  if (!c.headroom.empty())
    message += " Memory headroom learned from the workers, which the next plans keep (status.memoryHeadroom): " +
               c.headroom.summary() + ".";
  phase(c, "Failed");
  condition(c, "Failed", true, reason, message);
  // Nothing runs any more: Running, the plan's pods and its GPUs say so.
  if (condition_of(c.status, "Running").value("status", "") == "True")
    condition(c, "Running", false, reason, "the job failed (see Failed)");
  drop_plan_pods(c);
  event(c, "Warning", reason, message);
  delete_all_pods(c);
}

// Turns a new plan into pod actions: keep same-name live pods (re-annotated), delete the rest,
// create what is missing. `barrier` is the epoch the new workers may start from.
void actuate(Context& c, const JobPlan& plan, std::int64_t barrier) {
  std::set<std::string> wanted;
  NodeRoom room{*c.job.cluster, {}};
  for (const PlanPod& pod : plan.pods) {
    wanted.insert(pod.name);
    const PodPlan pp = pod_plan_for(spec_of(c), plan, pod, barrier);
    const PodObservation* existing = find_pod(c.job, pod.name);
    // An ended pod is deleted and replaced by converge() once gone.
    const bool ended = existing != nullptr && ended_before(*existing, plan.epoch);
    if (existing != nullptr && !existing->deleting && !ended && live(*existing, *c.job.cluster))
      c.actions.annotate.emplace_back(pod.name, pp);
    else if (existing == nullptr && room.take(pod))
      c.actions.create.push_back({pod, pp});
    else if (ended)
      c.actions.remove.push_back(pod.name);
  }
  for (const PodObservation& p : c.job.pods)
    if (!wanted.count(p.name) && !p.deleting) c.actions.remove.push_back(p.name);
}

PlanConstraints constraints_for(const JobSpec& spec, const std::optional<JobPlan>& previous, int target) {
  PlanConstraints limits;
  limits.min_gpus = 1;
  limits.max_gpus = target;
  if (previous) {
    limits.micro_batch_size = previous->micro_batch_size;
    limits.virtual_shards = previous->virtual_shards;
    if (spec.elasticity == ElasticityMode::kStrict || spec.elasticity == ElasticityMode::kOff) limits.dp = previous->dp;
  }
  return limits;
}

// Plans epoch `epoch` on the GPUs free to the job, leaving out its unavailable nodes.
PlanOutcome plan_for(const Context& c, const std::optional<JobPlan>& previous, int target, std::int64_t epoch) {
  const JobSpec& spec = spec_of(c);
  const planner::ClusterSpec snapshot = c.job.cluster->snapshot_for(spec.key(), false, c.unavailable.names());
  return plan_job(spec, snapshot, constraints_for(spec, previous, target), c.eval, epoch);
}

// On a plan, writes status.plan and acts; returns false on none (the status then says why).
bool act_on(Context& c, const PlanOutcome& outcome, std::int64_t epoch, bool old_workers_may_run,
            const std::string& why, const std::string& failure_context = "") {
  if (!outcome.plan) {
    // Every reconcile (5 s) retries; the event goes out once per distinct failure, not each time.
    std::string message = failure_context + outcome.message;
    // A job that learned headroom plans with less memory than the catalog says: say so, or the
    // "fits nowhere" reads as a planner that forgot the GPUs it used a minute ago.
    if (!c.headroom.empty())
      message += " (planned with the memory headroom the job's workers showed, per rank: " + c.headroom.summary() +
                 "; status.memoryHeadroom)";
    if (!c.unavailable.empty())
      message +=
          " (leaving out nodes its pods could not start on: " + c.unavailable.summary() + "; status.unavailableNodes)";
    refuse_with_condition(c, "Planned", outcome.reason, message);
    return false;
  }
  JobPlan plan = *outcome.plan;
  for (PlanPod& pod : plan.pods) pod.headroom_bytes = c.headroom.bytes_for(pod.gpu_type);
  // Gang start: ranks in several pods start together, once every pod's sidecar is up and waits
  // at the barrier (not_at_barrier()). Without it, ranks whose pod started first waited for a
  // peer still pulling its image (minutes for a PyTorch image) until their rendezvous timed out,
  // and each such timeout counted as a failure towards spec.backoffLimit.
  const bool gang = plan.pods.size() > 1;
  const std::int64_t barrier = old_workers_may_run || gang ? epoch - 1 : epoch;
  Json status_plan = plan.to_status();
  status_plan["barrier"] = barrier;
  c.status["plan"] = status_plan;
  c.status["lastRescaleTime"] = c.job.now;
  c.status.erase("declinedScaleUp");
  condition(c, "Planned", true, "Planned",
            plan.summary() + " on " + std::to_string(plan.gpus) + " GPUs, predicted " +
                std::to_string(static_cast<long long>(plan.tokens_per_second)) + " tokens/s");
  event(c, "Normal", "Planned",
        "epoch " + std::to_string(epoch) + ": " + plan.summary() + " on " + std::to_string(plan.gpus) + " GPUs (" +
            why + ")");
  actuate(c, plan, barrier);
  return true;
}

bool plan_and_act(Context& c, const std::optional<JobPlan>& previous, int target, std::int64_t epoch,
                  bool old_workers_may_run, const std::string& why, const std::string& failure_context = "") {
  return act_on(c, plan_for(c, previous, target, epoch), epoch, old_workers_may_run, why, failure_context);
}

// Why a plan pod is not up yet, for conditions and events; "" when its sidecar has reported.
std::string why_not_started(const PlanPod& pod, const PodObservation* p) {
  if (p == nullptr) return "not created yet: waiting for " + std::to_string(pod.gpus) + " GPUs on " + pod.node;
  if (p->report) return "";
  if (p->phase == "Pending")
    return "Pending: " +
           (p->waiting_reason.empty() ? std::string("its containers have not started") : p->waiting_reason);
  return "its sidecar has not reported";
}

// The barrier lifts once every pod of the plan stopped (or waits, if new: its sidecar is up)
// under the epoch and nothing else of the job is left; this lists what is not there yet, each
// with why, for the Running condition: a gang whose pod is stuck (an image that cannot be
// pulled, a node whose GPUs are still taken) waits up to spec.elasticity.podStartTimeoutSeconds
// (leave_unstarted_pods_behind()), so the user must be able to see which pod to look at. Empty:
// the barrier may lift.
std::vector<std::string> not_at_barrier(const Context& c, const JobPlan& plan) {
  std::vector<std::string> waiting;
  std::set<std::string> names;
  for (const PlanPod& pod : plan.pods) {
    names.insert(pod.name);
    const PodObservation* p = find_pod(c.job, pod.name);
    if (p == nullptr) {
      waiting.push_back(pod.name + " (" + why_not_started(pod, p) + ")");
    } else if (p->deleting) {
      waiting.push_back(pod.name + " (terminating)");
    } else if (!live(*p, *c.job.cluster)) {
      waiting.push_back(pod.name + " (" + (p->phase == "Failed" ? "Failed" : "its node is not ready") + ")");
    } else if (!report_is(p, plan.epoch, {PodState::kStopped, PodState::kWaiting})) {
      const std::string not_started = why_not_started(pod, p);
      waiting.push_back(pod.name + " (" +
                        (!not_started.empty() ? not_started
                         : p->report->epoch == plan.epoch
                             ? std::string(to_string(p->report->state))
                             : "its sidecar is still on epoch " + std::to_string(p->report->epoch)) +
                        ")");
    }
  }
  for (const PodObservation& p : c.job.pods)
    if (!names.count(p.name) && p.phase != "Succeeded" && p.phase != "Failed")
      waiting.push_back(p.name + " (old, still running)");
  return waiting;
}

// True when the job's own pods outside `plan` still hold GPUs on `node` (an old pod stopping its
// workers within their grace, or terminating): a new plan pod there waits for them, not for
// the node.
bool own_old_pod_on(const Context& c, const JobPlan& plan, const std::string& node) {
  for (const PodObservation& p : c.job.pods) {
    if (p.node != node || p.phase == "Succeeded" || p.phase == "Failed") continue;
    const bool in_plan =
        std::any_of(plan.pods.begin(), plan.pods.end(), [&](const PlanPod& q) { return q.name == p.name; });
    if (!in_plan || p.deleting) return true;
  }
  return false;
}

// When a plan pod that has not started began waiting (RFC 3339), or "" when it is not stuck:
// it has reported (its sidecar is up, perhaps still stopping old workers within their grace);
// it is not created because the job's own old pod still holds its node, or because the node
// has room now (converge() creates it in this reconcile). A pod exists since its creation; a
// missing one waits since the plan, or, when other jobs' leaving pods hold its GPUs, since
// they were due to be gone.
std::string waiting_since(const Context& c, const JobPlan& plan, const PlanPod& pod, const PodObservation* p) {
  const std::string planned = c.status.value("lastRescaleTime", "");
  if (p != nullptr) return p->report ? "" : !p->created.empty() ? p->created : planned;
  if (own_old_pod_on(c, plan, pod.node)) return "";
  const ClusterView& cluster = *c.job.cluster;
  const NodeView* node = cluster.find(pod.node);
  if (node == nullptr || !node->healthy) return planned;
  if (node->gpus - node->held() >= pod.gpus) return "";
  // The GPUs are the job's by the allocator's account and held only by pods that are leaving
  // (another job's, shrunk or requeued for it: cluster_view.h): it waits for them to stop, and
  // its time counts from when they were due to be gone, so one stuck terminating is not waited
  // for forever.
  if (cluster.free_to(*node, c.job.spec.key()) >= pod.gpus) return kube::later_rfc3339(planned, node->leaving_due);
  return planned;
}

// One Pending pod must not hold the others hostage (DESIGN.md). A plan pod that has not started
// spec.elasticity.podStartTimeoutSeconds after it began waiting (waiting_since()), while other
// pods' sidecars are up, is left behind: the job is re-planned without its node, which stays out
// of the job's plans (status.unavailableNodes, unavailable_nodes.h; the allocator does not grow
// the job onto it either). It keeps waiting, with `note` saying why or until when, for the
// Running condition, when no pod has started (an image no node can pull: a plan elsewhere would
// meet the same cause), or when the plan without the stuck nodes would fit nowhere or use fewer
// GPUs than resources.minGPUs. True: it re-planned.
bool leave_unstarted_pods_behind(Context& c, const JobPlan& plan, std::string& note) {
  const int timeout_s = c.job.spec.pod_start_timeout_seconds;
  const std::optional<double> now_s = kube::rfc3339_seconds(c.job.now);
  if (timeout_s <= 0 || !now_s) return false;
  std::vector<std::pair<const PlanPod*, std::string>> stuck;  // timed out, with why
  std::optional<double> next_deadline_s;
  bool any_started = false;
  int stuck_gpus = 0;
  for (const PlanPod& pod : plan.pods) {
    const PodObservation* p = find_pod(c.job, pod.name);
    any_started = any_started || (p != nullptr && p->report);
    const std::optional<double> since_s = kube::rfc3339_seconds(waiting_since(c, plan, pod, p));
    if (!since_s) continue;
    if (*since_s + timeout_s > *now_s) {
      next_deadline_s = std::min(next_deadline_s.value_or(*since_s + timeout_s), *since_s + timeout_s);
      continue;
    }
    stuck.emplace_back(&pod, why_not_started(pod, p));
    stuck_gpus += pod.gpus;
  }
  const std::string timeout = std::to_string(timeout_s) + " s";
  if (!any_started) {
    if (!stuck.empty())
      note = "; no pod of this epoch has started in " + timeout +
             ", so there is nothing to re-plan around: look at the pods (kubectl describe pod)";
    return false;
  }
  if (stuck.empty()) {
    if (next_deadline_s) {
      c.actions.requeue_after_seconds = *next_deadline_s - *now_s;
      note = "; a pod not started " + timeout +
             " after it was asked for is left behind (spec.elasticity.podStartTimeoutSeconds)";
    }
    return false;
  }
  std::string names;
  for (const auto& [pod, why] : stuck) names += (names.empty() ? "" : ", ") + pod->name + " (" + why + ")";
  UnavailableNodes after = c.unavailable;
  for (const auto& [pod, why] : stuck)
    after.leave_out(pod->node, "PodStartTimeout", pod->name + " (" + why + ") did not start in " + timeout);
  std::swap(c.unavailable, after);  // plan_for() leaves out c.unavailable
  PlanOutcome outcome = plan_for(c, plan, plan.gpus - stuck_gpus, plan.epoch + 1);
  std::swap(c.unavailable, after);
  if (outcome.plan && outcome.plan->gpus < c.job.spec.min_gpus) {
    outcome.message = "it would have " + std::to_string(outcome.plan->gpus) + " GPUs, fewer than resources.minGPUs (" +
                      std::to_string(c.job.spec.min_gpus) + ")";
    outcome.plan.reset();
  }
  const std::string their = stuck.size() == 1 ? "its node" : "their nodes";
  if (!outcome.plan) {
    note = "; " + names + " did not start in " + timeout + ", and without " + their +
           " the job cannot go on, so it waits: " + outcome.message;
    return false;
  }
  set_unavailable(c, std::move(after));
  const std::string why = names + " did not start in " + timeout + "; re-planned without " + their +
                          " (left out of the job's plans: " + c.unavailable.summary() + "; status.unavailableNodes)";
  act_on(c, outcome, plan.epoch + 1, true, why);
  phase(c, "Rescaling");
  condition(c, "Rescaling", true, "PodStartTimeout", why);
  event(c, "Warning", "PodStartTimeout", why);
  return true;
}

void waiting_for_pods(Context& c, const JobPlan& plan, const std::vector<std::string>& waiting,
                      const std::string& note) {
  std::string list;
  for (const std::string& w : waiting) list += (list.empty() ? "" : ", ") + w;
  condition(
      c, "Running", false, "WaitingForPods",
      "epoch " + std::to_string(plan.epoch) + " starts once every pod is at the barrier; waiting for " + list + note);
}

// Every old worker stopped: the new ranks may start, unless a relaunch after a failure still
// backs off (the shell reconciles again when that ends).
void lift_barrier_after_backoff(Context& c, const JobPlan& plan) {
  double wait_s = 0;
  if (!restart_due(FailureStreak::from_status(c.status), c.job.now, &wait_s)) {
    c.actions.requeue_after_seconds = wait_s;
    return;
  }
  if (c.status.contains("failures")) c.status["failures"].erase("restartAfter");
  c.status["plan"]["barrier"] = plan.epoch;
  for (const PlanPod& pod : plan.pods)
    c.actions.annotate.emplace_back(pod.name, pod_plan_for(spec_of(c), plan, pod, plan.epoch));
  event(c, "Normal", "BarrierLifted",
        "epoch " + std::to_string(plan.epoch) + ": every pod is at the barrier (old workers stopped, new sidecars up); "
        "starting the ranks");
}

// Level-based repair: a plan pod that is missing is created, a stale plan annotation is
// rewritten, and a pod of the job outside the plan is deleted (e.g. after a failed API call).
void converge(Context& c, const JobPlan& plan, std::int64_t barrier) {
  std::set<std::string> names;
  NodeRoom room{*c.job.cluster, {}};
  for (const PlanPod& pod : plan.pods) {
    names.insert(pod.name);
    const PodObservation* p = find_pod(c.job, pod.name);
    const PodPlan want = pod_plan_for(spec_of(c), plan, pod, barrier);
    if (p == nullptr) {
      if (room.take(pod)) c.actions.create.push_back({pod, want});
    } else if (ended_before(*p, plan.epoch)) {
      c.actions.remove.push_back(pod.name);
    } else if (!p->deleting && (!p->plan || p->plan->epoch != want.epoch || p->plan->barrier != want.barrier))
      c.actions.annotate.emplace_back(pod.name, want);
  }
  for (const PodObservation& p : c.job.pods)
    if (!names.count(p.name) && still_running(p)) c.actions.remove.push_back(p.name);
}

// What a spec changed since the plan's workers were launched, from the first pod of this epoch
// whose plan annotation differs from what the spec now gives (pods of an older epoch, mid-rescale,
// are compared once re-annotated). Workers read these only at launch, so a change means a new
// epoch, unless it touches what the job's checkpoint pins: the reference worker refuses a
// checkpoint of another model, seed or global batch, Megatron-LM one of another model, so
// relaunching onto it would only crash-loop the job into Failed.
struct LaunchChange {
  std::string relaunch;  // "trainSteps: 500 -> 900, ...": relaunch under a new epoch
  std::string pinned;    // "seed: 1234 -> 99": refused while the checkpoint (same folder) exists
  std::string in_use;    // "checkpointDir: ...": refused, another job names that folder
};

bool pinned_by_checkpoint(const std::string& field, WorkerKind kind) {
  if (field == "model") return true;
  return kind == WorkerKind::kFlotilla && (field == "seed" || field == "globalBatchSize");
}

// While the job has checkpointed into the folder its workers were launched with, the fields that
// checkpoint pins keep their launched values (from the newest plan a pod carries) in every plan
// and pod plan the operator makes: a rescale or a lost node must not launch a refused change,
// which the workers would refuse in turn and the job end Failed. SpecApplied says the change is
// refused (spec_applied()); reverted, or with a new checkpoint.path, nothing is held.
void hold_pinned_fields(Context& c) {
  const JobSpec& spec = c.job.spec;
  const PodPlan* launched = newest_pod_plan(c.job);
  if (launched == nullptr) return;
  JobSpec held = spec;
  const bool other_folder = launched->checkpoint_dir != spec.checkpoint_path;
  if (other_folder) {
    if (c.job.checkpoint_shared_with.empty()) return;  // a folder of its own: a fresh start there
    held.checkpoint_path = launched->checkpoint_dir;   // another job's folder: not moved into
  }
  // The status's checkpoint, or one a report shows before fold_progress() records it.
  std::int64_t checkpoint = c.status.value("progress", Json::object()).value("lastCheckpointStep", std::int64_t{-1});
  for (const PodObservation& p : c.job.pods)
    if (p.report) checkpoint = std::max(checkpoint, p.report->last_checkpoint_step);
  if (checkpoint >= 0) {
    if (pinned_by_checkpoint("seed", spec.worker_kind)) held.seed = launched->seed;
    if (pinned_by_checkpoint("globalBatchSize", spec.worker_kind)) held.global_batch_size = launched->global_batch_size;
    // A model launched from its inline shape cannot be rebuilt from its name: that change goes on.
    if (launched->model != spec.model && planner::find_preset(launched->model)) {
      held.model = launched->model;
      held.model_spec.reset();
    }
  }
  if (other_folder || held.seed != spec.seed || held.global_batch_size != spec.global_batch_size ||
      held.model != spec.model)
    c.held = std::move(held);
}

LaunchChange launch_change(const Context& c, const JobPlan& plan) {
  LaunchChange out;
  const bool checkpointed = c.status.value("progress", Json::object()).value("lastCheckpointStep", std::int64_t{-1}) >= 0;
  for (const PlanPod& pod : plan.pods) {
    const PodObservation* p = find_pod(c.job, pod.name);
    if (p == nullptr || p->deleting || !p->plan || p->plan->epoch != plan.epoch) continue;
    const std::vector<std::string> diff =
        launch_differences(*p->plan, pod_plan_for(c.job.spec, plan, pod, p->plan->barrier));
    if (diff.empty()) continue;
    bool new_folder = false;
    for (const std::string& d : diff) new_folder = new_folder || d.rfind("checkpointDir:", 0) == 0;
    if (new_folder && !c.job.checkpoint_shared_with.empty()) {
      for (const std::string& d : diff) out.in_use += (out.in_use.empty() ? "" : ", ") + d;
      return out;
    }
    for (const std::string& d : diff) {
      const bool pinned = checkpointed && !new_folder && pinned_by_checkpoint(d.substr(0, d.find(':')), c.job.spec.worker_kind);
      std::string& list = pinned ? out.pinned : out.relaunch;
      list += (list.empty() ? "" : ", ") + d;
    }
    return out;
  }
  return out;
}

// The SpecApplied condition: False while a change cannot reach the workers (set only once there
// was one, so jobs whose spec never changed carry no extra condition).
void spec_applied(Context& c, const LaunchChange& change) {
  const std::int64_t step = c.status.value("progress", Json::object()).value("lastCheckpointStep", std::int64_t{-1});
  if (!change.in_use.empty()) {
    const std::string message = "the running workers keep their launch: " + change.in_use + ": " +
                                c.job.spec.checkpoint_path + " is named by " + c.job.checkpoint_shared_with +
                                ", whose checkpoints and loss.log training there would overwrite; give this job a "
                                "folder of its own, or revert checkpoint.path";
    refuse_with_condition(c, "SpecApplied", "CheckpointPathInUse", message);
    return;
  }
  if (!change.pinned.empty()) {
    const std::string refused = "the running workers keep their launch: " + change.pinned;
    const std::string message = refused + " cannot change once the job has checkpointed (step " + std::to_string(step) +
                                " in " + c.job.spec.checkpoint_path +
                                "); revert it, or give a new checkpoint.path to train afresh";
    // One event per refused change: the message's step moves with every checkpoint.
    const Json before = condition_of(c.status, "SpecApplied");
    const bool repeated = before.value("status", "") == "False" && before.value("reason", "") == "CheckpointPinsIt" &&
                          before.value("message", "").rfind(refused + " cannot", 0) == 0;
    condition(c, "SpecApplied", false, "CheckpointPinsIt", message);
    if (!repeated) event(c, "Warning", "CheckpointPinsIt", message);
    return;
  }
  if (condition_of(c.status, "SpecApplied").value("status", "") == "False")
    condition(c, "SpecApplied", true, "Applied", "");
}

// A worker that measured more memory than predicted: the job's next plans keep the difference
// free on its GPU type (memory_headroom.h). The running plan fits (it measured), so nothing is
// re-planned now.
void learn_measured_peaks(Context& c, const JobPlan& plan) {
  if (c.base_eval.catalog == nullptr) return;
  MemoryHeadroom headroom = c.headroom;
  bool learned = false;
  for (const PlanPod& pod : plan.pods) {
    const PodObservation* p = find_pod(c.job, pod.name);
    // Only workers launched under this plan measured it: a pod still Waiting, Starting or
    // Stopping under the new epoch may carry the previous layout's peak (sidecars before this
    // check reported it until the barrier lifted).
    if (!report_is(p, plan.epoch, {PodState::kRunning, PodState::kSucceeded, PodState::kFailed}) ||
        p->report->peak_bytes <= 0)
      continue;
    auto t = after_measured_peak(plan, pod.name, p->report->peak_bytes, headroom, *c.base_eval.catalog);
    if (!t) continue;
    event(c, "Warning", "MemoryAbovePrediction", t->message);
    t->model = headroom_key(spec_of(c));
    headroom.set(std::move(*t));
    learned = true;
  }
  if (learned) set_headroom(c, std::move(headroom));
}

// Workers ran out of GPU memory on a plan predicted to fit: each one's GPU type gets the
// headroom that rules that plan out before the job is re-planned (memory_headroom.h). Pods of
// one type teach it once (the largest answer).
void learn_out_of_memory(Context& c, const JobPlan& plan, const std::vector<const PodObservation*>& pods) {
  if (c.base_eval.catalog == nullptr || pods.empty()) return;
  const MemoryHeadroom& before = c.headroom;
  MemoryHeadroom headroom = before;
  for (const PodObservation* pod : pods) {
    auto t = after_out_of_memory(plan, pod->name, pod->report->message, before, *c.base_eval.catalog);
    if (!t || t->bytes <= headroom.bytes_for(t->gpu_type)) continue;
    t->model = headroom_key(spec_of(c));
    headroom.set(std::move(*t));
  }
  for (const TypeHeadroom& t : headroom.types)
    if (t.bytes != before.bytes_for(t.gpu_type)) event(c, "Warning", "MemoryHeadroom", t.message);
  set_headroom(c, std::move(headroom));
}

// The allocator counts free GPUs by type, not where they are or whether they help the job (a
// slower type that adds nothing, GPUs the placement cannot use): a scale-up it grants may plan
// to exactly the running plan. Relaunching that would restart every worker for nothing, and again
// after each minimum interval; the job keeps its plan, and says so once. status.declinedScaleUp
// records it with the free GPUs it was judged on: while the plan and those are unchanged, the
// allocator offers the job no scale-up (which would keep the GPUs from other jobs' scale-ups
// every pass) and the reconcile does not plan the same one again.
Json declined_scale_up(const Context& c, const JobPlan& plan, int target_gpus) {
  return {{"epoch", plan.epoch}, {"targetGpus", target_gpus}, {"freeGpus", c.job.cluster->free_by_type()}};
}

void decline_scale_up(Context& c, const scaler::AllocatorDecision& d, const JobPlan& plan) {
  c.status["declinedScaleUp"] = declined_scale_up(c, plan, d.target_gpus);
  scaler::AllocatorDecision keep = d;
  keep.action = scaler::AllocAction::kKeep;
  keep.target_gpus = plan.gpus;
  keep.reason_code = "NoBetterPlan";
  keep.reason = "keep: a scale-up to " + std::to_string(d.target_gpus) +
                " GPUs was granted, but the best plan on the GPUs free to the job is the one it runs (" +
                plan.summary() + " on " + std::to_string(plan.gpus) + " GPUs), so no worker is restarted";
  if (c.status.value("lastDecision", Json::object()).value("reason", "") == keep.reason) return;
  write_decision(c.status, keep, plan.epoch, c.job.now);
  event(c, "Normal", keep.reason_code, keep.reason);
}

void running_plan(Context& c, JobPlan plan, std::int64_t barrier) {
  const JobObservation& job = c.job;
  // Lost pods, a changed target, or a pod that failed: a new epoch.
  int lost = 0;
  bool node_lost = false;  // the infrastructure's doing: never counts towards spec.backoffLimit
  bool failed = false;
  int gave_up = 0;
  std::string failure;
  std::string pod_failure;  // a pod of this epoch failed on a healthy node (e.g. its sidecar died)
  std::vector<const PodObservation*> out_of_memory;  // pods whose worker ran out of GPU memory
  for (const PlanPod& pod : plan.pods) {
    // Lost: its node is gone or unhealthy, or the pod failed or is being deleted. A pod not
    // in the cache yet (just created) is not lost: converge() creates it if it is missing.
    const PodObservation* p = find_pod(job, pod.name);
    const NodeView* node = job.cluster->find(pod.node);
    const bool node_ok = node != nullptr && node->healthy;
    // A failed or deleted pod of an older epoch is the old incarnation of a pod this plan
    // already replaces (same name); only one that failed under this epoch is a new loss.
    const bool this_epoch = p != nullptr && p->plan && p->plan->epoch >= plan.epoch;
    if (!node_ok || (this_epoch && (p->deleting || p->phase == "Failed"))) lost += pod.gpus;
    node_lost = node_lost || !node_ok;
    if (node_ok && this_epoch && p->phase == "Failed" && pod_failure.empty())
      pod_failure = p->name + ": the pod ended Failed (its sidecar exited)";
    if (p != nullptr && report_is(p, plan.epoch, {PodState::kFailed, PodState::kDegraded})) {
      failed = true;
      failure = p->name + ": " + p->report->message;
      gave_up = std::max(gave_up, p->report->restarts);
      if (is_out_of_memory(p->report->message)) out_of_memory.push_back(p);
    }
  }
  learn_measured_peaks(c, plan);
  learn_out_of_memory(c, plan, out_of_memory);
  // The rescale names an OOM by the pod that ran out, not by a peer that lost it.
  if (!out_of_memory.empty()) failure = out_of_memory.front()->name + ": " + out_of_memory.front()->report->message;
  const LaunchChange change = launch_change(c, plan);
  spec_applied(c, change);
  const std::string changed = change.pinned.empty() && change.in_use.empty() ? change.relaunch : "";
  const scaler::AllocatorDecision* d = job.decision ? &*job.decision : nullptr;
  // A world in one pod restarts locally up to spec.backoffLimit times (its pod plan's
  // maxLocalRestarts) before its sidecar gives up; with a limit of 0 there is no local restart
  // and the failure is judged here like any other (crash_loop.h).
  if (gave_up > 0 && gave_up >= job.spec.backoff_limit && out_of_memory.empty())
    return fail_job(c, "WorkerFailed", failure + ". " + kFixThenReapply);
  if (d != nullptr && d->action == scaler::AllocAction::kRequeue) {
    phase(c, "Pending");
    drop_plan_pods(c);
    write_decision(c.status, *d, plan.epoch, job.now);
    condition(c, "Running", false, "Requeued", d->reason);
    event(c, "Warning", "Requeued", d->reason);
    delete_all_pods(c);
    return;
  }
  const int target = d != nullptr && d->target_gpus > 0 ? d->target_gpus : plan.gpus - lost;
  bool resize = d != nullptr &&
                (d->action == scaler::AllocAction::kGrow || d->action == scaler::AllocAction::kShrink) &&
                d->target_gpus != plan.gpus;
  // A scale-up alone is planned once, here: when its best plan is the one the job runs, it is
  // declined instead of restarting every worker for nothing (decline_scale_up()).
  std::optional<PlanOutcome> scale_up;
  if (resize && d->action == scaler::AllocAction::kGrow && lost == 0 && !failed && changed.empty() &&
      c.status.value("declinedScaleUp", Json()) == declined_scale_up(c, plan, target)) {
    resize = false;  // declined already, and nothing it was judged on changed
  } else if (resize && d->action == scaler::AllocAction::kGrow && lost == 0 && !failed && changed.empty()) {
    scale_up = plan_for(c, plan, target, plan.epoch + 1);
    if (scale_up->plan && same_workers(*scale_up->plan, plan)) {
      decline_scale_up(c, *d, plan);
      resize = false;
    }
  }
  if (lost > 0 || failed || resize || !changed.empty()) {
    std::int64_t backoff_s = 0;
    if ((failed || !pod_failure.empty()) && !node_lost) {
      const BackoffPolicy policy{job.spec.backoff_limit};
      const FailureVerdict v = judge_failure(FailureStreak::from_status(c.status), progress_mark(c.status),
                                             failed ? failure : pod_failure, job.now, policy);
      c.status["failures"] = v.streak.to_status();
      if (v.give_up) return fail_job(c, "BackoffLimitExceeded", give_up_message(v, policy));
      backoff_s = v.backoff_seconds;
    }
    const std::string why = lost > 0                 ? "lost " + std::to_string(lost) + " GPUs"
                            : !out_of_memory.empty() ? "a worker ran out of GPU memory: " + failure
                            : failed                 ? "a worker failed: " + failure
                            : resize                 ? d->reason
                                                     : "the spec changed what the workers run (" + changed + ")";
    if (d != nullptr && (lost > 0 || failed || resize)) write_decision(c.status, *d, plan.epoch + 1, job.now);
    const int max_gpus = lost > 0 ? std::min(target, plan.gpus - lost) : (resize ? target : plan.gpus);
    const bool only_spec = lost == 0 && !failed && !resize;
    const std::string failure_context = only_spec ? "the spec change (" + changed + ") cannot be planned: " : "";
    const bool acted =
        scale_up ? act_on(c, *scale_up, plan.epoch + 1, true, why, failure_context)
                 : max_gpus > 0 && plan_and_act(c, plan, max_gpus, plan.epoch + 1, true, why, failure_context);
    if (!acted) {
      if (lost > 0 || failed) {  // cannot run on what is left: back to the queue
        phase(c, "Pending");
        drop_plan_pods(c);
        delete_all_pods(c);
        return;
      }
      if (!only_spec) return;
      // Only the spec changed and it cannot be planned: the workers go on as launched (Planned
      // says why), and the job's own life (pods, barrier, completion) goes on below.
    } else {
      phase(c, "Rescaling");
      const std::string reason = lost > 0                 ? "NodeLost"
                                 : !out_of_memory.empty() ? "OutOfMemory"
                                 : failed                 ? "WorkerFailed"
                                 : resize                 ? d->reason_code
                                                          : "SpecChanged";
      condition(c, "Rescaling", true, reason,
                backoff_s > 0 ? why + " (relaunch in " + std::to_string(backoff_s) + " s)" : why);
      event(c, lost > 0 || failed ? "Warning" : "Normal", reason, why);  // Preempted, BenefitCheckPassed, ...
      return;
    }
  }
  // A refused scale-up changes nothing but is the answer users look for (why did my job not
  // grow onto the idle GPUs?): its λ, S, overhead and probability go to status once per change,
  // whether the Poisson check refused it or the job ends too soon to repay the restart.
  if (d != nullptr && d->benefit && d->action == scaler::AllocAction::kKeep &&
      c.status.value("lastDecision", Json::object()).value("reason", "") != d->reason) {
    write_decision(c.status, *d, plan.epoch, job.now);
    event(c, "Normal", d->reason_code, d->reason);
  }
  // Before converge(): a pod left behind must not also be created or re-annotated for this epoch.
  std::string note;
  if (barrier < plan.epoch && leave_unstarted_pods_behind(c, plan, note)) return;
  converge(c, plan, barrier);
  if (barrier < plan.epoch) {
    const std::vector<std::string> waiting = not_at_barrier(c, plan);
    if (waiting.empty())
      lift_barrier_after_backoff(c, plan);
    else
      waiting_for_pods(c, plan, waiting, note);
    return;
  }
  bool all_running = true, all_done = true;
  for (const PlanPod& pod : plan.pods) {
    const PodObservation* p = find_pod(job, pod.name);
    // Its own report for this epoch, not the pod's phase: a pod Succeeded under an earlier
    // epoch (still observed while it is deleted) did not train this one.
    const bool done = report_is(p, plan.epoch, {PodState::kSucceeded});
    all_done = all_done && done;
    all_running = all_running && (done || report_is(p, plan.epoch, {PodState::kRunning}));
  }
  if (all_done) {
    phase(c, "Succeeded");
    // The step reached, not spec.trainSteps: a spec changed since the workers' launch is
    // relaunched above, but a trainSteps lowered below the checkpoint ends there.
    const std::string trained =
        "trained " + std::to_string(c.status["progress"].value("step", std::int64_t{0})) + " steps";
    condition(c, "Complete", true, "TrainStepsReached", trained);
    condition(c, "Running", false, "Complete", "");
    condition(c, "Rescaling", false, "Complete", "");
    event(c, "Normal", "Complete", trained);
    return;
  }
  if (all_running) {
    if (c.status.value("phase", "") != "Running")
      event(c, "Normal", "Running", "epoch " + std::to_string(plan.epoch) + ": every rank is training");
    phase(c, "Running");
    condition(c, "Running", true, "Training", plan.summary() + " on " + std::to_string(plan.gpus) + " GPUs");
    condition(c, "Rescaling", false, "Running", "");
  }
}

// A job whose plan has no pods runs none: a pod of that plan's epoch or before that still runs
// (a requeue's delete that failed) goes, since the allocator already counts its GPUs as free
// (cluster_view.h). A pod of a later epoch is one this job's newer status (not seen yet here)
// created, and a Failed one holds no GPU and keeps its logs.
void delete_leftover_pods(Context& c, const std::optional<JobPlan>& previous) {
  if (!previous) return;
  for (const PodObservation& p : c.job.pods)
    if (still_running(p) && p.plan && p.plan->epoch <= previous->epoch) c.actions.remove.push_back(p.name);
}

// The highest plan epoch any of the job's pods carries (annotation or report); 0 for none. A new
// plan is numbered above it: a pod compares epochs, and one that read a higher epoch than the new
// plan's would take the new plan for an older one.
std::int64_t highest_pod_epoch(const JobObservation& job) {
  std::int64_t highest = 0;
  for (const PodObservation& p : job.pods) {
    if (p.plan) highest = std::max(highest, p.plan->epoch);
    if (p.report) highest = std::max(highest, p.report->epoch);
  }
  return highest;
}

void no_plan(Context& c, const std::optional<JobPlan>& previous) {
  const JobObservation& job = c.job;
  if (c.status.value("phase", "").empty()) phase(c, "Pending");
  const scaler::AllocatorDecision* d = job.decision ? &*job.decision : nullptr;
  if (d == nullptr) {
    delete_leftover_pods(c, previous);
    condition(c, "Planned", false, "WaitingForAllocator", "waiting for the allocator's first pass");
    return;
  }
  if (d->action != scaler::AllocAction::kAdmit) {
    delete_leftover_pods(c, previous);
    c.status["queuePosition"] = d->queue_position;
    condition(c, "Planned", false, d->reason_code, d->reason);
    return;
  }
  // Old pods of a requeued job must be gone before new workers start.
  bool old_pods = false;
  for (const PodObservation& p : job.pods) old_pods = old_pods || (p.phase != "Succeeded" && p.phase != "Failed");
  const std::int64_t epoch = std::max(previous ? previous->epoch : 0, highest_pod_epoch(job)) + 1;
  write_decision(c.status, *d, epoch, job.now);
  c.status.erase("queuePosition");
  if (plan_and_act(c, previous, d->target_gpus, epoch, old_pods, d->reason)) phase(c, "Pending");
}

// The plan the job's pods run, as far as their annotations tell (the highest epoch's): epoch,
// layout, micro-batch size and virtual shards, with no pods (the requeued form); nullopt when no
// pod carries a plan.
std::optional<JobPlan> plan_of_pods(const JobObservation& job) {
  const PodPlan* newest = newest_pod_plan(job);
  if (newest == nullptr) return std::nullopt;
  JobPlan plan;
  plan.epoch = highest_pod_epoch(job);
  plan.pp = newest->pp;
  plan.dp = newest->dp;
  plan.tp = newest->tp;
  plan.micro_batch_size = newest->micro_batch_size;
  plan.virtual_shards = newest->virtual_shards;
  plan.partition = newest->partition;
  return plan;
}

// GPUs the job's live pods (not deleting, not ended) hold, by their plans' ranks.
int live_pod_gpus(const JobObservation& job) {
  int gpus = 0;
  for (const PodObservation& p : job.pods)
    if (p.plan && still_running(p)) gpus += static_cast<int>(p.plan->ranks.size());
  return gpus;
}

// status.plan that cannot be read (edited by hand through the status subresource, or written by
// another version of the operator) is said once, with why, and replaced by what the pods' own
// plans tell: epoch, layout, micro-batch size and virtual shards (what the checkpoint pins). A job
// whose pods still train is planned again at once on the GPUs they hold, under an epoch above
// theirs, keeping them where they stand; one without (or if that fails) is left as requeued,
// admitted again by the allocator and resuming from its newest checkpoint.
void replan_unreadable_plan(Context& c, const std::string& why) {
  const std::string said = "status.plan cannot be read (" + why + ")";
  const std::optional<JobPlan> ran = plan_of_pods(c.job);
  if (!ran) {
    c.status.erase("plan");
    phase(c, "Pending");
    event(c, "Warning", "PlanUnreadable",
          said + "; no pod of the job carries a plan either: it is admitted again as new");
    return;
  }
  c.status["plan"] = ran->to_status();
  const int gpus = live_pod_gpus(c.job);
  const std::int64_t epoch = ran->epoch + 1;
  if (gpus > 0 &&
      plan_and_act(c, ran, gpus, epoch, true, "status.plan could not be read; re-planned on its pods' GPUs")) {
    phase(c, "Rescaling");
    event(c, "Warning", "PlanUnreadable",
          said + "; re-planned as epoch " + std::to_string(epoch) + " on the " + std::to_string(gpus) +
              " GPUs its pods hold, keeping them");
    return;
  }
  phase(c, "Pending");
  event(c, "Warning", "PlanUnreadable",
        said + "; left as requeued at epoch " + std::to_string(ran->epoch) +
            ": admitted again by the allocator, resuming from the newest checkpoint");
}

// Its checkpoint folder is another job's: admitting it would overwrite that job's checkpoints and
// loss log, and resume from its steps. It waits, and Planned says what to change (once per owner).
void wait_for_own_folder(Context& c, const std::optional<JobPlan>& previous) {
  delete_leftover_pods(c, previous);  // a requeued plan's pods whose deletion did not go through
  const std::string& owner = c.job.checkpoint_owner;
  const std::string message = "spec.checkpoint.path " + c.job.spec.checkpoint_path + " holds the checkpoints of " +
                              owner +
                              " (created before this job): training there would overwrite them and its loss.log. "
                              "Give this job its own checkpoint.path, or delete " +
                              owner + " to take its checkpoints over";
  if (c.status.value("phase", "").empty()) phase(c, "Pending");
  refuse_with_condition(c, "Planned", "CheckpointPathInUse", message);
}

// The spec was refused (InvalidSpec) and reads now, fixed or reverted while the pods ran: the
// plan in force is the job's again (a job without one is told why it waits by no_plan()).
void spec_reads_again(Context& c, const std::optional<JobPlan>& plan) {
  if (condition_of(c.status, "Planned").value("reason", "") != "InvalidSpec" || !plan || plan->pods.empty()) return;
  condition(c, "Planned", true, "Planned",
            plan->summary() + " on " + std::to_string(plan->gpus) + " GPUs (the spec reads again)");
}

// A Failed job whose spec changed since it failed (re-applied with a fix) runs again.
bool failed_before_this_generation(const Json& status, std::int64_t generation) {
  return status.value("phase", "") == "Failed" && true_before_generation(status, "Failed", generation);
}

// Back to Pending with no pods in the plan: admitted again, a new epoch, a fresh failure streak.
void start_again(Context& c) {
  phase(c, "Pending");
  c.status.erase("failures");
  drop_plan_pods(c);
  condition(c, "Failed", false, "SpecChanged", "the spec changed after the failure; starting again");
  event(c, "Normal", "SpecChanged",
        "generation " + std::to_string(c.job.spec.generation) + " after the failure: starting again");
}

// A Succeeded job whose spec now asks for more steps than it trained (trainSteps raised after it
// finished): it trains on from its checkpoint. Only a spec newer than the completion counts, so
// a job that ended short of trainSteps for another reason is not started over and over.
bool succeeded_short_of_train_steps(const Json& status, const JobSpec& spec) {
  if (status.value("phase", "") != "Succeeded") return false;
  const std::int64_t step = status.value("progress", Json::object()).value("step", std::int64_t{0});
  return step < spec.train_steps && true_before_generation(status, "Complete", spec.generation);
}

void train_on(Context& c) {
  const std::int64_t step = c.status["progress"].value("step", std::int64_t{0});
  const std::string why = "spec.trainSteps " + std::to_string(c.job.spec.train_steps) +
                          " is beyond the step the job finished at (" + std::to_string(step) +
                          "): training on from its checkpoint";
  phase(c, "Pending");
  drop_plan_pods(c);
  condition(c, "Complete", false, "SpecChanged", why);
  event(c, "Normal", "SpecChanged", why);
}

}  // namespace

void set_condition(Json& status, const std::string& type, bool value, const std::string& reason,
                   const std::string& message, std::int64_t generation, const std::string& now) {
  Json conditions = status.value("conditions", Json::array());
  const std::string v = value ? "True" : "False";
  for (Json& c : conditions) {
    if (c.value("type", "") != type) continue;
    if (c.value("status", "") != v) c["lastTransitionTime"] = now;
    c["status"] = v;
    c["reason"] = reason;
    c["message"] = message;
    c["observedGeneration"] = generation;
    status["conditions"] = conditions;
    return;
  }
  conditions.push_back({{"type", type},
                        {"status", v},
                        {"reason", reason},
                        {"message", message},
                        {"observedGeneration", generation},
                        {"lastTransitionTime", now}});
  status["conditions"] = conditions;
}

JobActions reconcile_job(const JobObservation& job, const planner::EvalContext& eval) {
  Context c{job, eval, job.status.is_object() ? job.status : Json::object(), {}, {}, {}, eval};
  hold_pinned_fields(c);
  load_headroom(c);
  load_unavailable(c);
  if (failed_before_this_generation(c.status, job.spec.generation)) start_again(c);
  if (succeeded_short_of_train_steps(c.status, job.spec)) train_on(c);
  c.status["observedGeneration"] = job.spec.generation;
  const std::string current = c.status.value("phase", "");
  if (current == "Succeeded" || current == "Failed") {
    for (const PodObservation& p : job.pods)
      if (still_running(p)) c.actions.remove.push_back(p.name);
  } else {
    std::string unreadable;
    const std::optional<JobPlan> plan = JobPlan::from_status(c.status.value("plan", Json()), &unreadable);
    if (!unreadable.empty()) {
      replan_unreadable_plan(c, unreadable);
    } else {
      spec_reads_again(c, plan);
      fold_progress(job, c.status);
      if (plan && !plan->pods.empty())
        running_plan(c, *plan, c.status["plan"].value("barrier", plan->epoch));
      else if (!job.checkpoint_owner.empty())
        wait_for_own_folder(c, plan);
      else
        no_plan(c, plan);
    }
  }
  if (c.status != job.status) c.actions.status = c.status;
  return c.actions;
}

}  // namespace flotilla::op
