// reconcile_job(): the per-job state machine, step by step on hand-built observations, as the
// operator would see them between API calls (docs/operator.md, "State machine").
#include "operator/job_reconciler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "operator/decision_history.h"
#include "operator/memory_headroom.h"
#include "scaler/benefit_check.h"
#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
namespace fs = flotilla::scaler;
using namespace flotilla::op::testing;

namespace {

fs::AllocatorDecision decision(fs::AllocAction action, int target, std::string code = "Admitted") {
  fs::AllocatorDecision d;
  d.key = "team/demo";
  d.action = action;
  d.target_gpus = target;
  d.reason_code = code;
  d.reason = code;
  return d;
}

struct Harness {
  World world;
  fo::ClusterView cluster;
  fo::JobObservation obs;
  Harness() {
    cluster.nodes = {node("n0", 2), node("n1", 2)};
    obs.spec = spec_of(job_object());
    obs.cluster = &cluster;
    obs.now = "2026-11-24T00:00:10Z";
  }
  fo::JobActions step() { return fo::reconcile_job(obs, world.context()); }
  // Applies the actions as the API server would: status stored, pods created or re-annotated
  // (Pending, no report), deleted ones marked deleting.
  void apply(const fo::JobActions& a) {
    if (a.status) obs.status = *a.status;
    for (const fo::PodCreate& c : a.create) {
      fo::PodObservation p;
      p.name = c.pod.name;
      p.node = c.pod.node;
      p.phase = "Pending";
      p.plan = c.plan;
      obs.pods.push_back(p);
      for (fo::NodeView& n : cluster.nodes)
        if (n.name == c.pod.node) n.held_by_job["team/demo"] += c.pod.gpus;
    }
    for (const auto& [name, plan] : a.annotate)
      for (fo::PodObservation& p : obs.pods)
        if (p.name == name) p.plan = plan;
    for (const std::string& name : a.remove)
      for (fo::PodObservation& p : obs.pods)
        if (p.name == name) p.deleting = true;
  }
  void report(fo::PodObservation& p, flotilla::PodState state, std::int64_t epoch, std::int64_t step = 0) {
    flotilla::PodReport r;
    r.epoch = epoch;
    r.state = state;
    r.step = step;
    p.report = r;
  }
  void remove_deleted() {
    std::vector<fo::PodObservation> kept;
    for (const fo::PodObservation& p : obs.pods) {
      if (p.deleting) {
        for (fo::NodeView& n : cluster.nodes)
          if (n.name == p.node) n.held_by_job.clear();
      } else {
        kept.push_back(p);
      }
    }
    obs.pods = kept;
  }
  std::string phase() const { return obs.status.value("phase", ""); }
  std::int64_t epoch() const { return obs.status["plan"].value("epoch", std::int64_t{0}); }
  std::int64_t barrier() const { return obs.status["plan"].value("barrier", std::int64_t{0}); }
};

nlohmann::json condition_of(const nlohmann::json& status, const std::string& type) {
  for (const auto& c : status.value("conditions", nlohmann::json::array()))
    if (c.value("type", "") == type) return c;
  return nlohmann::json::object();
}

std::string condition(const nlohmann::json& status, const std::string& type) {
  const nlohmann::json c = condition_of(status, type);
  return c.empty() ? "" : c.value("status", "") + "/" + c.value("reason", "");
}

std::string condition_message(const nlohmann::json& status, const std::string& type) {
  return condition_of(status, type).value("message", "");
}

// A relaxed job with a 60 s pod start timeout, admitted at 00:00 on 4 GPUs: two pods, neither
// started, the barrier below the epoch.
void admit_with_start_timeout(Harness& h) {
  h.obs.spec = spec_of(job_object(R"({"elasticity": {"mode": "relaxed", "podStartTimeoutSeconds": 60}})"));
  h.obs.now = "2026-11-24T00:00:00Z";
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
}

}  // namespace

TEST(JobReconciler, WaitsForTheAllocatorThenPlansAndCreatesOnePodPerNode) {
  Harness h;
  auto a = h.step();
  ASSERT_TRUE(a.status);
  EXPECT_EQ(a.status->value("phase", ""), "Pending");
  EXPECT_EQ(condition(*a.status, "Planned"), "False/WaitingForAllocator");
  EXPECT_TRUE(a.create.empty());
  h.apply(a);

  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1);
  EXPECT_EQ(h.barrier(), 0) << "gang start: ranks in two pods wait until both sidecars are up";
  EXPECT_EQ(condition(h.obs.status, "Planned"), "True/Planned");
  ASSERT_EQ(a.create.size(), 2u);  // two nodes of 2 GPUs: one pod each
  std::set<int> ranks;
  for (const fo::PodCreate& c : a.create) {
    EXPECT_EQ(c.pod.gpus, 2);
    EXPECT_EQ(c.plan.epoch, 1);
    EXPECT_EQ(c.plan.world_size, 4);
    EXPECT_EQ(c.plan.virtual_shards * c.plan.micro_batch_size, 8) << "V = global batch / micro-batch";
    ranks.insert(c.plan.ranks.begin(), c.plan.ranks.end());
    if (std::find(c.plan.ranks.begin(), c.plan.ranks.end(), 0) != c.plan.ranks.end()) {
      EXPECT_EQ(c.plan.rendezvous_pod, c.pod.name);
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(h.obs.status["plan"].value("pp", 0) * h.obs.status["plan"].value("dp", 0), 4);
  // One sidecar up (the other pod still pulling its image, say): the barrier holds, however long,
  // and the Running condition names the pod that holds it.
  h.obs.decision.reset();
  h.report(h.obs.pods[0], flotilla::PodState::kWaiting, 1);
  h.obs.pods[1].phase = "Pending";
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 0);
  EXPECT_EQ(condition(h.obs.status, "Running"), "False/WaitingForPods");
  const std::string waiting = condition_message(h.obs.status, "Running");
  EXPECT_NE(waiting.find(h.obs.pods[1].name + " (Pending: its containers have not started)"), std::string::npos)
      << waiting;
  EXPECT_EQ(waiting.find(h.obs.pods[0].name), std::string::npos) << "the pod at the barrier is not listed: " << waiting;
  h.obs.pods[1].phase = "Running";
  h.report(h.obs.pods[1], flotilla::PodState::kWaiting, 1);
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.barrier(), 1) << "both sidecars wait at the barrier: the ranks start together";
  EXPECT_EQ(a.annotate.size(), 2u);
  for (const fo::PodObservation& p : h.obs.pods) EXPECT_EQ(p.plan->barrier, 1);
}

// A world in one pod has no peer to wait for: it starts at once.
TEST(JobReconciler, AOnePodWorldStartsAtOnce) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 1u);
  EXPECT_EQ(h.barrier(), 1);
  EXPECT_EQ(h.obs.pods[0].plan->barrier, 1);
}

TEST(JobReconciler, RunningAfterEveryPodReportsThenNodeLossShrinksBehindABarrier) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 1);  // admitted at its smallest size: D 1
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 1u);
  // A report of another epoch does not count.
  h.report(h.obs.pods[0], flotilla::PodState::kRunning, 0);
  h.obs.decision.reset();
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Pending");
  h.report(h.obs.pods[0], flotilla::PodState::kRunning, 1, 12);
  h.obs.pods[0].report->tokens_per_second = 2560.739170165164;
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Running");
  EXPECT_EQ(h.obs.status["progress"].value("step", 0), 12);
  EXPECT_EQ(h.obs.status["progress"]["tokensPerSecond"].dump(), "2560.7") << "kubectl's Tokens/s column prints it";

  // Scale-up to 4 under strict elasticity: D stays 1, so PP 4 over both nodes, epoch 2.
  h.obs.decision = decision(fs::AllocAction::kGrow, 4, "BenefitCheckPassed");
  h.apply(h.step());
  h.obs.decision.reset();
  EXPECT_EQ(h.phase(), "Rescaling");
  EXPECT_EQ(h.obs.status["plan"].value("pp", 0), 4);
  EXPECT_EQ(h.obs.status["plan"].value("dp", 0), 1);
  h.remove_deleted();
  h.apply(h.step());  // creates the pods the old one was in the way of
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kWaiting, 2);
  h.apply(h.step());
  ASSERT_EQ(h.barrier(), 2);
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kRunning, 2, 20);
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");

  // n1 fails: the plan is re-made on n0 alone, epoch 3, behind barrier 2.
  h.cluster.nodes[1].healthy = false;
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Rescaling") << h.obs.status.dump(1);
  EXPECT_EQ(h.epoch(), 3);
  EXPECT_EQ(h.barrier(), 2);
  EXPECT_EQ(h.obs.status["plan"].value("gpus", 0), 2);
  EXPECT_EQ(h.obs.status["plan"].value("dp", 0), 1) << "strict: only PP changes";
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/NodeLost");
  // The barrier holds until the survivor stopped under epoch 3 and the lost pod is gone.
  for (auto& p : h.obs.pods)
    if (p.node == "n0") h.report(p, flotilla::PodState::kStopped, 3, 25);
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 2) << "the n1 pod is still there";
  h.remove_deleted();
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 3);
  ASSERT_EQ(h.obs.pods.size(), 1u);
  EXPECT_EQ(h.obs.pods[0].plan->barrier, 3);
  EXPECT_EQ(h.obs.pods[0].plan->world_size, 2);
  h.report(h.obs.pods[0], flotilla::PodState::kSucceeded, 3, 100);
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Succeeded");
  EXPECT_EQ(condition(h.obs.status, "Complete"), "True/TrainStepsReached");
}

// Strict elasticity keeps D: a job admitted at D 4 cannot shrink to 2 GPUs, so losing a node
// sends it back to the queue with its checkpoint instead of changing what the loss depends on.
TEST(JobReconciler, StrictJobThatCannotKeepItsDataParallelDegreeIsRequeued) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  ASSERT_EQ(h.obs.status["plan"].value("dp", 0), 4);
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kRunning, 1, 5);
  h.obs.decision.reset();
  h.apply(h.step());
  h.cluster.nodes[1].healthy = false;
  const auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_EQ(h.obs.status["plan"]["pods"].size(), 0u);
  EXPECT_EQ(a.remove.size(), 2u);
  // A delete that did not happen (the API server refused it): the queued job's next reconcile
  // deletes the pod, since the allocator already counts its GPUs as free.
  for (auto& p : h.obs.pods) p.deleting = false;
  h.obs.pods.pop_back();
  h.obs.decision = decision(fs::AllocAction::kWait, 0, "WaitingForGpus");
  const auto again = h.step();
  ASSERT_EQ(again.remove.size(), 1u);
  EXPECT_EQ(again.remove[0], h.obs.pods[0].name);
  // A pod of a later epoch than the status this reconcile reads (the job cache lags the pods'):
  // it belongs to a newer plan of this job and stays.
  h.obs.pods[0].plan->epoch = h.epoch() + 1;
  EXPECT_TRUE(h.step().remove.empty());
  // Admitted again with the leftover there: the new plan keeps it (re-annotated), not deleted
  // and re-planned around as lost.
  h.obs.pods[0].plan->epoch = h.epoch();
  h.cluster.nodes[1].healthy = true;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  const auto admitted = h.step();
  ASSERT_EQ(admitted.annotate.size(), 1u) << condition_message(*admitted.status, "Planned");
  EXPECT_EQ(admitted.annotate[0].first, h.obs.pods[0].name);
  EXPECT_TRUE(admitted.remove.empty());
}

// A status.plan that cannot be read (an edit by hand through the status subresource, another
// operator version) is said once, with why. The pods still train, so the job is planned again at
// once on the GPUs they hold, under an epoch above every epoch they carry (3 here; the unreadable
// plan would have given 1), with the micro-batch size their checkpoint pins (their annotation's 2,
// not the planner's free choice), keeping them where they stand.
TEST(JobReconciler, AnUnreadablePlanIsSaidOnceAndReplacedFromThePodsPlans) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 2u);
  const int planned_micro_batch = h.obs.status["plan"].value("microBatchSize", 0);
  const int pinned_micro_batch = planned_micro_batch == 2 ? 1 : 2;
  for (auto& p : h.obs.pods) {
    p.phase = "Running";
    p.plan->epoch = 3;
    p.plan->micro_batch_size = pinned_micro_batch;
    h.report(p, flotilla::PodState::kRunning, 3, 40);
  }
  h.obs.status["plan"]["epoch"] = "three";
  h.obs.decision.reset();
  auto a = h.step();
  std::vector<std::string> reasons;
  for (const auto& e : a.events) reasons.push_back(e.reason);
  ASSERT_EQ(reasons, (std::vector<std::string>{"Planned", "PlanUnreadable"}));
  EXPECT_NE(a.events[1].message.find("type must be number"), std::string::npos) << a.events[1].message;
  EXPECT_NE(a.events[1].message.find("re-planned as epoch 4 on the 4 GPUs its pods hold"), std::string::npos)
      << a.events[1].message;
  EXPECT_TRUE(a.create.empty());
  EXPECT_TRUE(a.remove.empty()) << "the workers are kept";
  ASSERT_EQ(a.annotate.size(), 2u);
  EXPECT_EQ(a.annotate[0].second.epoch, 4);
  EXPECT_EQ(a.annotate[0].second.barrier, 3) << "the old workers stop first";
  h.apply(a);
  EXPECT_EQ(h.epoch(), 4);
  EXPECT_EQ(h.phase(), "Rescaling");
  EXPECT_EQ(h.obs.status["plan"].value("microBatchSize", 0), pinned_micro_batch);
  for (const auto& e : h.step().events) EXPECT_NE(e.reason, "PlanUnreadable") << "said once";
  // A plan without pods is unreadable too; one that is null is no plan, and says nothing.
  std::string why;
  EXPECT_FALSE(fo::JobPlan::from_status(nlohmann::json{{"epoch", 2}}, &why));
  EXPECT_EQ(why, "no pods");
  why.clear();
  EXPECT_FALSE(fo::JobPlan::from_status(nlohmann::json(), &why));
  EXPECT_EQ(why, "");
}

// With no pod left running, it is left as requeued at the pods' epoch (their constraints kept),
// for the allocator to admit again, and the new plan is numbered above it.
TEST(JobReconciler, AnUnreadablePlanOfAJobWithoutLivePodsIsLeftRequeued) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  for (auto& p : h.obs.pods) {
    p.phase = "Failed";
    p.plan->epoch = 3;
  }
  h.obs.status["plan"].erase("pods");
  h.obs.decision.reset();
  auto a = h.step();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].reason, "PlanUnreadable");
  EXPECT_NE(a.events[0].message.find("(no pods); left as requeued at epoch 3"), std::string::npos)
      << a.events[0].message;
  h.apply(a);
  EXPECT_EQ(h.epoch(), 3);
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_TRUE(h.obs.status["plan"]["pods"].empty());
  EXPECT_EQ(fo::plan_epoch_of(h.obs.status), 3);
  EXPECT_EQ(fo::plan_epoch_of(nlohmann::json{{"plan", {{"epoch", "three"}}}}), 0) << "never throws";
  h.remove_deleted();
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 4);
}

// A spec refused while the pods ran (InvalidSpec), then fixed or reverted: the plan in force is
// Planned again, not reported refused for as long as it runs.
TEST(JobReconciler, ASpecThatReadsAgainIsPlannedAgain) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  ASSERT_EQ(condition(h.obs.status, "Planned"), "True/Planned");
  fo::set_condition(h.obs.status, "Planned", false, "InvalidSpec", "spec.model: ...", 1, "2026-11-24T00:00:05Z");
  h.obs.decision.reset();
  h.apply(h.step());
  EXPECT_EQ(condition(h.obs.status, "Planned"), "True/Planned");
  EXPECT_NE(condition_message(h.obs.status, "Planned").find("the spec reads again"), std::string::npos);
}

TEST(JobReconciler, ANewPodWaitsForItsNodeToHaveTheGpusFree) {
  Harness h;
  h.cluster.nodes = {node("n0", 2)};
  h.obs.decision = decision(fs::AllocAction::kAdmit, 1);
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 1u);
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kRunning, 1);
  // Grow 1 -> 2 on the same node: the 2-GPU pod replaces the 1-GPU one, but only once the old
  // pod has released its GPU (the kubelet would refuse it before).
  h.obs.decision = decision(fs::AllocAction::kGrow, 2, "BenefitCheckPassed");
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_TRUE(a.create.empty()) << "n0 has only 1 GPU free while the old pod terminates";
  ASSERT_EQ(a.remove.size(), 1u);
  h.obs.decision.reset();  // made on epoch 1: not acted on again
  a = h.step();
  EXPECT_TRUE(a.create.empty());
  h.remove_deleted();
  a = h.step();
  ASSERT_EQ(a.create.size(), 1u);
  EXPECT_EQ(a.create[0].pod.gpus, 2);
  EXPECT_EQ(a.create[0].plan.barrier, 1) << "still behind the barrier until it reports Waiting";
}

TEST(JobReconciler, AModelThatFitsNowhereSaysWhyAndCreatesNothing) {
  Harness h;
  h.obs.spec = spec_of(job_object(
      R"({"model": "llama-2-70b", "worker": {"kind": "megatron", "megatron": {"script": "/m/pretrain_gpt.py"}}})"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  const auto a = h.step();
  ASSERT_TRUE(a.status);
  EXPECT_TRUE(a.create.empty());
  EXPECT_EQ(a.status->value("phase", ""), "Pending");
  const std::string planned = condition(*a.status, "Planned");
  EXPECT_EQ(planned.rfind("False/", 0), 0u) << planned;
  ASSERT_FALSE(a.events.empty());
  EXPECT_EQ(a.events[0].type, "Warning");
  // The change it names is one a TrainingJob can make: no worker is launched with recompute.
  const std::string message = condition_message(*a.status, "Planned");
  EXPECT_EQ(message.find("recompute"), std::string::npos) << message;
  EXPECT_NE(message.find("no single change tried (larger TP"), std::string::npos) << message;
}

// A sidecar's report after it gave up on local restarts (a world in one pod).
flotilla::PodReport gave_up(std::int64_t epoch, int restarts) {
  flotilla::PodReport r;
  r.epoch = epoch;
  r.state = flotilla::PodState::kFailed;
  r.restarts = restarts;
  r.message = "gave up after " + std::to_string(restarts) + " restarts: cannot open loss log";
  return r;
}

TEST(JobReconciler, AWorkerThatGaveUpFailsTheJobAndCleansUp) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  h.obs.pods[0].report = gave_up(1, 3);
  const auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.phase(), "Failed");
  EXPECT_NE(condition(h.obs.status, "Failed").find("WorkerFailed"), std::string::npos);
  EXPECT_EQ(a.remove.size(), 2u);
}

// spec.backoffLimit reaches the sidecars (their local restarts) and judges their giving up: with
// a limit of 5, a sidecar that restarted 3 times has not given up on the job's behalf yet, and
// one that gave up after 5 fails the job.
TEST(JobReconciler, ASidecarGivesUpWithinTheJobsBackoffLimit) {
  Harness h;
  h.obs.spec = spec_of(job_object(R"({"backoffLimit": 5})"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  const auto admitted = h.step();
  ASSERT_FALSE(admitted.create.empty());
  for (const fo::PodCreate& c : admitted.create) EXPECT_EQ(c.plan.max_local_restarts, 5);
  h.apply(admitted);
  h.obs.pods[0].report = gave_up(1, 3);
  h.obs.decision.reset();
  h.apply(h.step());
  EXPECT_NE(h.phase(), "Failed") << "3 local restarts are within a limit of 5: the operator relaunches";
  h.obs.pods[0].report = gave_up(h.epoch(), 5);
  h.obs.pods[0].plan->epoch = h.epoch();
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Failed");
  EXPECT_NE(condition(h.obs.status, "Failed").find("WorkerFailed"), std::string::npos);
}

// A scale-up the benefit check refuses changes nothing, but its inputs reach status once (the
// user's question: why did my job not grow onto the idle GPUs?), with an event.
TEST(JobReconciler, ARefusedScaleUpIsWrittenToStatusWithItsInputsOnce) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 1);
  h.apply(h.step());
  h.report(h.obs.pods[0], flotilla::PodState::kRunning, 1, 5);
  h.obs.decision.reset();
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");

  fs::AllocatorDecision refused = decision(fs::AllocAction::kKeep, 1, "BenefitCheckRefused");
  refused.benefit = fs::check_benefit(0.2, 1.5, 3.0);  // P = exp(-0.2 * 3 * 1.5 / 0.5) = 0.165
  ASSERT_FALSE(refused.benefit->scale_up);
  refused.reason = "keep: scale-up to 4 refused: " + refused.benefit->explain();
  h.obs.decision = refused;
  auto a = h.step();
  ASSERT_TRUE(a.status);
  const auto& last = (*a.status)["lastDecision"];
  EXPECT_EQ(last.value("action", ""), "keep");
  EXPECT_NEAR(last.value("arrivalRatePerSecond", 0.0), 0.2, 1e-12);
  EXPECT_NEAR(last.value("speedup", 0.0), 1.5, 1e-12);
  EXPECT_NEAR(last.value("overheadSeconds", 0.0), 3.0, 1e-12);
  EXPECT_NEAR(last.value("probability", 0.0), std::exp(-0.2 * 9.0), 1e-9);
  EXPECT_TRUE(a.create.empty() && a.remove.empty() && a.annotate.empty()) << "a refusal changes no pod";
  EXPECT_EQ(h.epoch(), 1);
  bool evented = false;
  for (const auto& e : a.events) evented = evented || e.reason == "BenefitCheckRefused";
  EXPECT_TRUE(evented);
  h.apply(a);
  a = h.step();
  bool again = false;
  for (const auto& e : a.events) again = again || e.reason == "BenefitCheckRefused";
  EXPECT_FALSE(again) << "written once per change, not on every reconcile";
  // The admission it replaced in lastDecision is still in the history, oldest first.
  const std::vector<fo::ScalingDecision> recent = fo::recent_decisions(h.obs.status);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].action, "admit");
  EXPECT_EQ(recent[1].action, "keep");
  // Refused because the job ends too soon, though the Poisson check passed: written and
  // evented the same way, once.
  fs::AllocatorDecision ends = decision(fs::AllocAction::kKeep, 1, "EndsBeforeRestartRepays");
  ends.benefit = fs::check_benefit(0.0, 1.5, 3.0);
  ASSERT_TRUE(ends.benefit->scale_up);
  ends.reason = "keep: scale-up to 4 refused: the job ends before the restart repays itself";
  h.obs.decision = ends;
  a = h.step();
  h.apply(a);
  int ends_events = 0;
  for (const auto& e : a.events) ends_events += e.reason == "EndsBeforeRestartRepays";
  EXPECT_EQ(ends_events, 1);
  EXPECT_EQ(h.obs.status["lastDecision"].value("reason", ""), ends.reason);
  a = h.step();
  for (const auto& e : a.events) EXPECT_NE(e.reason, "EndsBeforeRestartRepays") << "once per change";
}

namespace {

// Every pod of the job reports `state` under `epoch` (a failure's message on the first).
void report_all(Harness& h, flotilla::PodState state, std::int64_t epoch, std::int64_t step = 0,
                const std::string& message = "") {
  for (fo::PodObservation& p : h.obs.pods) {
    if (p.deleting) continue;
    h.report(p, state, epoch, step);
    p.report->message = message;
  }
}

// Admitted on `gpus` GPUs, every pod's sidecar at the barrier, the barrier lifted: epoch 1's
// ranks may start.
void admit_and_lift_barrier(Harness& h, int gpus) {
  h.obs.decision = decision(fs::AllocAction::kAdmit, gpus);
  h.apply(h.step());
  h.obs.decision.reset();
  report_all(h, flotilla::PodState::kWaiting, 1);
  h.apply(h.step());
}

std::string at_second(int s) {
  char text[32];
  std::snprintf(text, sizeof text, "2026-11-24T00:%02d:%02dZ", s / 60, s % 60);
  return text;
}

std::string failed_message(const nlohmann::json& status) {
  for (const auto& c : status.value("conditions", nlohmann::json::array()))
    if (c.value("type", "") == "Failed") return c.value("message", "");
  return "";
}

// One worker failure under the current epoch, then the sidecars stop under the new one: returns
// the reconcile's actions after the stop. Pods are two (4 GPUs on n0 and n1), so the world spans
// pods and only the operator can relaunch it.
fo::JobActions fail_then_stop(Harness& h, std::int64_t step, const std::string& message) {
  const std::int64_t epoch = h.epoch();
  report_all(h, flotilla::PodState::kDegraded, epoch, step, message);
  h.apply(h.step());
  if (h.phase() == "Failed") return {};
  report_all(h, flotilla::PodState::kStopped, h.epoch(), step);
  const fo::JobActions a = h.step();
  h.apply(a);
  return a;
}

}  // namespace

// A data file that does not exist: every relaunch fails before its first step. The relaunches
// wait 1, 2, 4 s (the barrier is not lifted before), and the 4th failure in a row (backoffLimit
// 3, the default) fails the job with the worker's own line; the epoch stays small, the pods go.
TEST(JobReconciler, FailuresWithoutProgressBackOffThenFailTheJobWithTheWorkersError) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  h.obs.decision.reset();
  ASSERT_EQ(h.obs.pods.size(), 2u);
  const std::string error = "cannot start the workers: data file '/data/t.txt' not found; fix spec.worker.data";
  int t = 10;
  for (int k = 1; k <= 3; ++k) {
    h.obs.now = at_second(t);
    fo::JobActions a = fail_then_stop(h, 0, error);
    EXPECT_EQ(h.phase(), "Rescaling");
    EXPECT_EQ(h.obs.status["failures"].value("consecutive", 0), k);
    EXPECT_LT(h.barrier(), h.epoch()) << "failure " << k << ": relaunched before its backoff";
    ASSERT_TRUE(a.requeue_after_seconds) << "failure " << k;
    const int backoff_s = 1 << (k - 1);
    EXPECT_DOUBLE_EQ(*a.requeue_after_seconds, backoff_s + 1) << "whole seconds: the second after restartAfter";
    h.obs.now = at_second(t + backoff_s);  // restartAfter itself: still waiting
    h.apply(h.step());
    EXPECT_LT(h.barrier(), h.epoch());
    h.obs.now = at_second(t + backoff_s + 1);
    h.apply(h.step());
    EXPECT_EQ(h.barrier(), h.epoch()) << "failure " << k << ": the backoff is over";
    EXPECT_FALSE(h.obs.status["failures"].contains("restartAfter"));
    t += backoff_s + 2;
  }
  EXPECT_EQ(h.epoch(), 4);
  report_all(h, flotilla::PodState::kDegraded, h.epoch(), 0, error);
  const fo::JobActions a = h.step();
  h.apply(a);
  EXPECT_EQ(h.phase(), "Failed");
  EXPECT_EQ(condition(h.obs.status, "Failed"), "True/BackoffLimitExceeded");
  const std::string message = failed_message(h.obs.status);
  EXPECT_NE(message.find(error), std::string::npos) << message;
  EXPECT_NE(message.find("4 times in a row"), std::string::npos) << message;
  EXPECT_EQ(a.remove.size(), 2u) << "no pod keeps running";
  EXPECT_EQ(h.epoch(), 4) << "no new epoch once Failed";
  h.obs.now = at_second(t + 100);
  EXPECT_FALSE(h.step().status) << "Failed is terminal until the spec changes";
}

// Killed workers mid-training: each failure follows new steps, so the job recovers every time
// (one streak of one), as many times as it fails.
TEST(JobReconciler, FailuresAfterProgressAreRecoveredEveryTime) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  h.obs.decision.reset();
  int t = 10;
  for (int k = 1; k <= 6; ++k) {
    h.obs.now = at_second(t);
    fail_then_stop(h, 10 * k, "local rank 1: killed by signal 9");
    ASSERT_EQ(h.phase(), "Rescaling") << "failure " << k;
    EXPECT_EQ(h.obs.status["failures"].value("consecutive", 0), 1);
    h.obs.now = at_second(t + 2);
    h.apply(h.step());
    EXPECT_EQ(h.barrier(), h.epoch());
    t += 3;
  }
  EXPECT_EQ(h.obs.status["progress"].value("step", 0), 60);
}

// The user fixes the spec and re-applies it (a new generation): the Failed job is admitted again
// under a new epoch; the same generation stays Failed.
TEST(JobReconciler, AFailedJobRunsAgainWhenItsSpecChanges) {
  Harness h;
  h.obs.spec = spec_of(job_object(R"({"backoffLimit": 0})"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  report_all(h, flotilla::PodState::kDegraded, 1, 0, "data file '/data/t.txt' not found");
  h.obs.decision.reset();
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Failed");
  EXPECT_NE(failed_message(h.obs.status).find("spec.backoffLimit 0"), std::string::npos);
  h.remove_deleted();
  nlohmann::json fixed = job_object(R"({"backoffLimit": 0, "worker": {"data": "/data/fixed.txt"}})");
  fixed["metadata"]["generation"] = 2;
  h.obs.spec = spec_of(fixed);
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_EQ(condition(h.obs.status, "Failed"), "False/SpecChanged");
  EXPECT_FALSE(h.obs.status.contains("failures"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  const fo::JobActions a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 2);
  ASSERT_EQ(a.create.size(), 2u);
  EXPECT_EQ(a.create[0].plan.data_path, "/data/fixed.txt");
}

// A job re-created over a finished checkpoint: the pods report the resumed step but no measured
// loss or speed, so status.progress has the step and no made-up loss of 0.
TEST(JobReconciler, AResumedOnlyReportGivesTheStepButNoLoss) {
  Harness h;
  admit_and_lift_barrier(h, 4);
  ASSERT_EQ(h.barrier(), 1);
  report_all(h, flotilla::PodState::kSucceeded, 1, 100);
  for (fo::PodObservation& p : h.obs.pods) p.report->last_checkpoint_step = 100;
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Succeeded");
  EXPECT_EQ(h.obs.status["progress"].value("step", 0), 100);
  EXPECT_EQ(h.obs.status["progress"].value("lastCheckpointStep", 0), 100);
  EXPECT_FALSE(h.obs.status["progress"].contains("loss"));
}

namespace {

// The harness's job as a user re-applies it: the same spec with `extra` merged, one generation on.
fo::JobSpec changed_spec(const std::string& extra, std::int64_t generation) {
  nlohmann::json job = job_object(extra);
  job["metadata"]["generation"] = generation;
  return spec_of(job);
}

const std::string kRelaxed = R"("elasticity": {"mode": "relaxed", "minRescaleIntervalSeconds": 0})";

// Relaxed elasticity, admitted on 4 GPUs (two pods, n0 and n1), training at step 30 under epoch
// 1, its last checkpoint `checkpoint` (-1: none).
void running_relaxed_job(Harness& h, std::int64_t checkpoint) {
  h.obs.spec = spec_of(job_object("{" + kRelaxed + "}"));
  admit_and_lift_barrier(h, 4);
  ASSERT_EQ(h.obs.pods.size(), 2u);
  report_all(h, flotilla::PodState::kRunning, 1, 30);
  for (auto& p : h.obs.pods) p.report->last_checkpoint_step = checkpoint;
  h.apply(h.step());
}

// Admitted on 2 GPUs (one pod, epoch 1) and training at `step`, its last checkpoint `checkpoint`.
void running_one_pod_job(Harness& h, std::int64_t step, std::int64_t checkpoint = -1) {
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 1u);
  h.obs.decision.reset();
  report_all(h, flotilla::PodState::kRunning, 1, step);
  h.obs.pods[0].report->last_checkpoint_step = checkpoint;
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");
}

}  // namespace

// Workers read trainSteps (and data, seed, ...) only at launch: a change to a running job is a
// new epoch at the same size whose pods carry the new value, and the condition names the field.
TEST(JobReconciler, ARunningJobWhoseTrainStepsChangeIsRelaunchedUnderANewEpoch) {
  Harness h;
  running_one_pod_job(h, 30);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 1) << "an unchanged spec relaunches nothing";

  h.obs.spec = changed_spec(R"({"trainSteps": 250})", 2);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(h.barrier(), 1) << "behind the barrier: the old workers stop (and checkpoint) first";
  EXPECT_EQ(h.phase(), "Rescaling");
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/SpecChanged");
  EXPECT_EQ(h.obs.status["plan"].value("gpus", 0), 2) << "the same size";
  EXPECT_NE(condition_message(h.obs.status, "Rescaling").find("trainSteps: 100 -> 250"), std::string::npos)
      << h.obs.status["conditions"].dump();
  ASSERT_EQ(h.obs.pods.size(), 1u);
  EXPECT_EQ(h.obs.pods[0].plan->train_steps, 250);
  EXPECT_EQ(h.obs.pods[0].plan->epoch, 2);
  // Under the new epoch nothing differs any more: no third epoch.
  report_all(h, flotilla::PodState::kStopped, 2, 30);
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 2);
  report_all(h, flotilla::PodState::kRunning, 2, 31);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(h.phase(), "Running");
}

// A finished job whose trainSteps is raised trains on: Pending, re-admitted, and its Completed
// pods (whose sidecars have exited) replaced rather than re-annotated; Complete names the step.
TEST(JobReconciler, ASucceededJobWhoseTrainStepsAreRaisedTrainsOn) {
  Harness h;
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  h.obs.decision.reset();
  report_all(h, flotilla::PodState::kSucceeded, 1, 100);
  h.obs.pods[0].phase = "Succeeded";
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Succeeded");
  EXPECT_EQ(condition_message(h.obs.status, "Complete"), "trained 100 steps");
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Succeeded") << "nothing changed: it stays done";

  h.obs.spec = changed_spec(R"({"trainSteps": 300})", 2);
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_EQ(condition(h.obs.status, "Complete"), "False/SpecChanged");
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 2);
  ASSERT_EQ(a.remove.size(), 1u) << "the Completed pod of the same name goes";
  EXPECT_TRUE(a.create.empty()) << "and is created again only once gone";
  h.remove_deleted();
  h.obs.decision.reset();
  a = h.step();
  h.apply(a);
  ASSERT_EQ(a.create.size(), 1u);
  EXPECT_EQ(a.create[0].plan.train_steps, 300);
  EXPECT_EQ(a.create[0].plan.barrier, 2) << "nothing old runs: it starts at once";
}

// A change the planner cannot honour (a global batch the fixed virtual shards do not divide) keeps
// the job running as it was, says why in Planned, and tells it in one event, not one per reconcile.
TEST(JobReconciler, ARePlanThatFailsKeepsTheJobRunningAndWarnsOnce) {
  Harness h;
  running_one_pod_job(h, 30);
  h.obs.spec = changed_spec(R"({"globalBatchSize": 7})", 2);
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1) << "nothing launched";
  const std::string planned = condition(h.obs.status, "Planned");
  EXPECT_EQ(planned.rfind("False/", 0), 0u) << planned;
  int warnings = 0;
  for (const auto& e : a.events) warnings += e.type == "Warning";
  EXPECT_EQ(warnings, 1);
  for (int i = 0; i < 3; ++i) {
    a = h.step();
    h.apply(a);
    for (const auto& e : a.events) EXPECT_NE(e.type, "Warning") << "repeated: " << e.reason << ": " << e.message;
  }
  EXPECT_EQ(h.epoch(), 1);
  EXPECT_TRUE(h.obs.pods.size() == 1 && !h.obs.pods[0].deleting) << "the running pod is kept";
  EXPECT_EQ(condition_message(h.obs.status, "Planned")
                .rfind("the spec change (globalBatchSize: 8 -> 7) cannot be planned: ", 0),
            0u)
      << h.obs.status["conditions"].dump();
  // Its life goes on: the old workers finish and the job is Succeeded.
  report_all(h, flotilla::PodState::kSucceeded, 1, 100);
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Succeeded");
}

// Once a job has checkpointed, a change the checkpoint pins (the reference worker refuses a
// checkpoint of another seed, global batch or model) is not launched: the workers go on, and
// SpecApplied says what to do. Reverted, it clears; with a new checkpoint folder it relaunches.
TEST(JobReconciler, AChangeTheCheckpointPinsIsRefusedWhileTheWorkersGoOn) {
  Harness h;
  running_one_pod_job(h, 30, 20);
  h.obs.spec = changed_spec(R"({"seed": 99, "trainSteps": 300})", 2);
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1) << "no relaunch onto a checkpoint that would refuse the new seed";
  EXPECT_EQ(condition(h.obs.status, "SpecApplied"), "False/CheckpointPinsIt");
  const std::string message = condition_message(h.obs.status, "SpecApplied");
  EXPECT_NE(message.find("seed: 1234 -> 99"), std::string::npos) << message;
  EXPECT_NE(message.find("new checkpoint.path"), std::string::npos) << message;
  int warnings = 0;
  for (const auto& e : a.events) warnings += e.type == "Warning";
  EXPECT_EQ(warnings, 1);
  // Training goes on and checkpoints again: the condition's step moves, no second warning.
  h.obs.pods[0].report->step = 45;
  h.obs.pods[0].report->last_checkpoint_step = 40;
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1);
  EXPECT_NE(condition_message(h.obs.status, "SpecApplied").find("(step 40 in"), std::string::npos);
  for (const auto& e : a.events) EXPECT_NE(e.type, "Warning") << "repeated: " << e.message;
  // Reverted (the trainSteps change alone): it relaunches and SpecApplied clears.
  h.obs.spec = changed_spec(R"({"trainSteps": 300})", 3);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(condition(h.obs.status, "SpecApplied"), "True/Applied");
  // A new seed with a new checkpoint folder trains afresh there: relaunched.
  report_all(h, flotilla::PodState::kStopped, 2, 30);
  h.apply(h.step());
  report_all(h, flotilla::PodState::kRunning, 2, 31);
  h.apply(h.step());
  ASSERT_EQ(h.epoch(), 2);
  h.obs.spec = changed_spec(R"({"trainSteps": 300, "seed": 99, "checkpoint": {"path": "/ckpt-2"}})", 4);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 3);
}

// A refused change must not reach the workers through a rescale either: after a node loss the
// new epoch's pods carry the seed, global batch and model the checkpoint was written with (the
// reference worker would refuse anything else, and the job would end Failed), and SpecApplied
// still says the change waits. A new run that fails says Running False and holds no pods.
TEST(JobReconciler, ARescaleKeepsWhatTheCheckpointPinsWhileAChangeToItIsRefused) {
  Harness h;
  running_relaxed_job(h, 20);
  h.obs.spec = changed_spec(R"({"seed": 99, "globalBatchSize": 16, )" + kRelaxed + "}", 2);
  h.apply(h.step());
  ASSERT_EQ(h.epoch(), 1);
  ASSERT_EQ(condition(h.obs.status, "SpecApplied"), "False/CheckpointPinsIt");
  h.cluster.nodes[1].healthy = false;
  h.apply(h.step());
  ASSERT_EQ(h.epoch(), 2) << h.obs.status.dump();
  const auto pinned_as_launched = [&h](const std::string& when) {
    for (const auto& p : h.obs.pods) {
      if (p.deleting || !p.plan || p.plan->epoch != 2) continue;
      EXPECT_EQ(p.plan->seed, 1234) << when;
      EXPECT_EQ(p.plan->global_batch_size, 8) << when;
    }
  };
  pinned_as_launched("planned");
  for (auto& p : h.obs.pods)
    if (p.node == "n0") h.report(p, flotilla::PodState::kStopped, 2, 25);
  h.remove_deleted();
  h.apply(h.step());
  ASSERT_EQ(h.barrier(), 2);
  pinned_as_launched("barrier lifted");
  report_all(h, flotilla::PodState::kRunning, 2, 26);
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2) << "the held values are what the pods run: no relaunch";
  EXPECT_EQ(condition(h.obs.status, "SpecApplied"), "False/CheckpointPinsIt");
  // Failing for another reason leaves nothing that says it runs.
  report_all(h, flotilla::PodState::kFailed, 2, 26, "worker crashed");
  for (auto& p : h.obs.pods) p.report->restarts = 5;
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Failed");
  EXPECT_EQ(condition(h.obs.status, "Running").rfind("False/", 0), 0u) << h.obs.status["conditions"].dump();
  EXPECT_EQ(h.obs.status["plan"].value("gpus", -1), 0);
  EXPECT_TRUE(h.obs.status["plan"]["pods"].empty());
}

// A job whose checkpoint folder is another job's is not admitted, even on a decision that
// admits it: it waits with one Warning and Planned saying what to change; once the folder is its
// own (the owner deleted, or a new checkpoint.path) it is admitted as usual.
TEST(JobReconciler, AJobNamingAnotherJobsCheckpointFolderWaitsAndSaysWhy) {
  Harness h;
  h.obs.checkpoint_owner = "team/first";
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  fo::JobActions a = h.step();
  h.apply(a);
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_TRUE(h.obs.pods.empty());
  EXPECT_EQ(condition(h.obs.status, "Planned"), "False/CheckpointPathInUse");
  const std::string message = condition_message(h.obs.status, "Planned");
  EXPECT_NE(message.find("holds the checkpoints of team/first"), std::string::npos) << message;
  EXPECT_NE(message.find("Give this job its own checkpoint.path, or delete team/first"), std::string::npos) << message;
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].reason, "CheckpointPathInUse");
  a = h.step();
  EXPECT_TRUE(a.events.empty()) << "said once";
  h.obs.checkpoint_owner.clear();
  h.apply(h.step());
  EXPECT_EQ(h.obs.pods.size(), 1u);
  EXPECT_EQ(h.epoch(), 1);
}

// A running job whose checkpoint.path is changed to a folder another job names (before or after
// it) is not moved there: the workers go on in their own folder, also across a rescale, and
// SpecApplied says why.
TEST(JobReconciler, ARunningJobIsNotMovedIntoAnotherJobsCheckpointFolder) {
  Harness h;
  running_relaxed_job(h, -1);
  h.obs.spec = changed_spec(R"({"checkpoint": {"path": "/theirs"}, )" + kRelaxed + "}", 2);
  h.obs.checkpoint_shared_with = "team/other";
  fo::JobActions a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1) << "not relaunched into /theirs";
  EXPECT_EQ(condition(h.obs.status, "SpecApplied"), "False/CheckpointPathInUse");
  EXPECT_NE(condition_message(h.obs.status, "SpecApplied").find("/theirs is named by team/other"), std::string::npos)
      << condition_message(h.obs.status, "SpecApplied");
  h.cluster.nodes[1].healthy = false;
  h.apply(h.step());
  ASSERT_EQ(h.epoch(), 2);
  for (const auto& p : h.obs.pods)
    if (!p.deleting && p.plan && p.plan->epoch == 2) EXPECT_EQ(p.plan->checkpoint_dir, "/ckpt");
}

// A pod whose sidecar finished the last step just as a new epoch was planned (it was re-annotated
// while running, then ended Succeeded under the old epoch) is replaced, not waited on forever.
TEST(JobReconciler, APodThatSucceededUnderTheOldEpochIsReplacedForTheNewOne) {
  Harness h;
  running_one_pod_job(h, 90);
  h.obs.spec = changed_spec(R"({"trainSteps": 300})", 2);
  h.apply(h.step());
  ASSERT_EQ(h.epoch(), 2);
  ASSERT_EQ(h.obs.pods[0].plan->epoch, 2) << "re-annotated while it ran";
  report_all(h, flotilla::PodState::kSucceeded, 1, 100);
  h.obs.pods[0].phase = "Succeeded";
  auto a = h.step();
  h.apply(a);
  ASSERT_EQ(a.remove.size(), 1u) << "its sidecar has exited: deleted, to be created again";
  EXPECT_NE(h.phase(), "Succeeded") << "it did not train epoch 2";
  h.remove_deleted();
  a = h.step();
  h.apply(a);
  ASSERT_EQ(a.create.size(), 1u);
  EXPECT_EQ(a.create[0].plan.train_steps, 300);
  report_all(h, flotilla::PodState::kWaiting, 2);
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 2);
}

namespace {

// The fixture's emu-slow, claimed at 64 MB with no context (so the model's tensors dominate),
// and a slower emu-roomy of the same memory.
flotilla::planner::GpuCatalog catalog_of_64_mb_gpus() {
  return flotilla::planner::apply_catalog_override(flotilla::planner::builtin_gpu_catalog(), R"(gpus:
  emu-slow: {memory_bytes: 64000000, peak_bf16_tflops: 0.001, compute_efficiency: 1, mem_bandwidth_bytes_per_s: 1e11,
             gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11, inter_node_bandwidth_bytes_per_s: 1e10,
             usd_per_hour: 1, cuda_context_bytes: 0}
  emu-roomy: {memory_bytes: 64000000, peak_bf16_tflops: 0.0005, compute_efficiency: 1, mem_bandwidth_bytes_per_s: 1e11,
              gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11, inter_node_bandwidth_bytes_per_s: 1e10,
              usd_per_hour: 1, cuda_context_bytes: 0}
)")
      .value();
}

// The harness's cluster plus node n2 of two emu-roomy GPUs.
void add_roomy_node(Harness& h) {
  fo::NodeView roomy = node("n2", 2);
  roomy.gpu_type = "emu-roomy";
  h.cluster.nodes.push_back(roomy);
}

}  // namespace

// A worker runs out of GPU memory on a plan predicted to fit (here the catalog claims emu-slow
// has 64 MB; the model's tensors dominate, as on a real GPU, so no context): the job learns
// headroom for that GPU type (memory_headroom.h) and is re-planned under it at once. The small
// model's embedding block alone needs more than 90 % of the failed rank's prediction, so no split
// helps on emu-slow: the re-plan moves to the slower emu-roomy node. Reconciling the same reports
// again learns nothing more.
TEST(JobReconciler, AWorkerOutOfMemoryTeachesTheJobHeadroomAndRePlansItUnderIt) {
  Harness h;
  h.world.catalog = catalog_of_64_mb_gpus();
  add_roomy_node(h);
  h.obs.spec = spec_of(job_object(R"({"elasticity": {"mode": "relaxed"}})"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  h.apply(h.step());
  h.obs.decision.reset();
  const auto failed = fo::JobPlan::from_status(h.obs.status["plan"]);
  ASSERT_TRUE(failed);
  ASSERT_EQ(failed->pp, 1) << "the whole small model fits one (claimed) 64 MB GPU: " << failed->summary();
  const std::int64_t failed_peak = failed->stages[0].predicted_peak_bytes;
  report_all(h, flotilla::PodState::kWaiting, 1);
  h.apply(h.step());  // the gang's barrier lifts
  report_all(h, flotilla::PodState::kRunning, 1, 5);
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");

  const std::string oom = "out of GPU memory: could not allocate 1.00 MiB (emulated emu-slow: 30 MB in use of 32 MB)";
  report_all(h, flotilla::PodState::kDegraded, 1, 5, oom);
  const fo::JobActions a = h.step();
  h.apply(a);
  // Hand-computed: a rank may now hold 0.9 of the failed prediction; the headroom is the rest of
  // the 64 MB.
  const std::int64_t may_hold = static_cast<std::int64_t>(std::floor(0.9 * static_cast<double>(failed_peak)));
  const fo::MemoryHeadroom learned = fo::MemoryHeadroom::from_status(h.obs.status);
  ASSERT_EQ(learned.types.size(), 1u) << h.obs.status.dump();
  EXPECT_EQ(learned.types[0].gpu_type, "emu-slow");
  EXPECT_EQ(learned.types[0].bytes, 64'000'000 - may_hold);
  EXPECT_EQ(learned.types[0].reason, "OutOfMemory");
  EXPECT_EQ(learned.types[0].epoch, 1);
  EXPECT_NE(learned.types[0].message.find(oom), std::string::npos) << learned.types[0].message;
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/OutOfMemory") << h.obs.status.dump();
  EXPECT_NE(condition_message(h.obs.status, "Rescaling").find("a worker ran out of GPU memory"), std::string::npos);
  int warnings = 0;  // the rescale's, and the headroom's with its numbers
  for (const fo::JobEvent& e : a.events)
    warnings += e.type == "Warning" && (e.reason == "OutOfMemory" || e.reason == "MemoryHeadroom");
  EXPECT_EQ(warnings, 2);

  // The re-plan: a new epoch, more stages, each emu-slow stage within what a rank may hold there
  // (its prediction carries the headroom), the rest on emu-roomy.
  const auto replanned = fo::JobPlan::from_status(h.obs.status["plan"]);
  ASSERT_TRUE(replanned);
  EXPECT_EQ(replanned->epoch, 2);
  EXPECT_GT(replanned->pp, 1) << replanned->summary();
  bool roomy_used = false;
  for (const fo::PlanStage& s : replanned->stages) {
    EXPECT_LE(s.predicted_peak_bytes, 64'000'000);
    if (s.gpu_type == "emu-slow") {
      EXPECT_LE(s.predicted_peak_bytes - learned.types[0].bytes, may_hold);
    }
    roomy_used = roomy_used || s.gpu_type == "emu-roomy";
  }
  EXPECT_TRUE(roomy_used) << h.obs.status["plan"].dump();
  // Each pod records its own prediction and, on emu-slow, the headroom in it.
  for (const fo::PlanPod& p : replanned->pods) {
    EXPECT_GT(p.predicted_peak_bytes, 0) << p.name;
    EXPECT_EQ(p.headroom_bytes, p.gpu_type == "emu-slow" ? learned.types[0].bytes : 0) << p.name;
  }
  EXPECT_EQ(h.obs.status["failures"].value("consecutive", 0), 1) << "an OOM is a failure like any other";

  // The same (old-epoch) reports again: nothing more is learned.
  const fo::JobActions again = h.step();
  h.apply(again);
  EXPECT_EQ(fo::MemoryHeadroom::from_status(h.obs.status).types[0].bytes, learned.types[0].bytes);
  for (const fo::JobEvent& e : again.events) {
    EXPECT_NE(e.reason, "OutOfMemory");
    EXPECT_NE(e.reason, "MemoryHeadroom");
  }
}

// A worker that measured more than its plan predicted (and did not run out): the headroom is kept
// for the job's next plans, and the running plan goes on.
TEST(JobReconciler, AMeasuredPeakAbovePredictionIsKeptForTheNextPlans) {
  Harness h;
  admit_and_lift_barrier(h, 4);
  report_all(h, flotilla::PodState::kRunning, 1, 5);
  const std::int64_t predicted = h.obs.status["plan"]["stages"][0].value("predictedPeakBytes", std::int64_t{0});
  ASSERT_GT(predicted, 0);
  h.obs.pods[1].report->peak_bytes = predicted + 1'000'000'000;  // 1 GB over, above 1 % of 16 GB
  const fo::JobActions a = h.step();
  h.apply(a);
  EXPECT_EQ(h.phase(), "Running");
  EXPECT_EQ(h.epoch(), 1) << "the running plan measured what it holds: no re-plan";
  const fo::MemoryHeadroom learned = fo::MemoryHeadroom::from_status(h.obs.status);
  ASSERT_EQ(learned.types.size(), 1u);
  EXPECT_EQ(learned.types[0].bytes, 1'000'000'000);
  EXPECT_EQ(learned.types[0].reason, "MeasuredAbovePrediction");
  // Reported again: the prediction it is compared with did not move, so nothing new.
  const fo::JobActions again = h.step();
  EXPECT_FALSE(again.status) << again.status->dump();
}

// A pod that has read the new plan but whose workers have not started under it yet reports the
// new epoch with the previous layout's peak (older sidecars did, before the barrier lifted): that
// peak was not measured on this plan, and teaching it as headroom could requeue a healthy job.
TEST(JobReconciler, APeakReportedBeforeTheWorkersRunThePlanTeachesNothing) {
  Harness h;
  admit_and_lift_barrier(h, 4);
  const std::int64_t predicted = h.obs.status["plan"]["stages"][0].value("predictedPeakBytes", std::int64_t{0});
  ASSERT_GT(predicted, 0);
  for (const flotilla::PodState state :
       {flotilla::PodState::kWaiting, flotilla::PodState::kStarting, flotilla::PodState::kStopping}) {
    report_all(h, state, 1, 0);
    h.obs.pods[1].report->peak_bytes = predicted + 1'000'000'000;
    h.apply(h.step());
    EXPECT_TRUE(fo::MemoryHeadroom::from_status(h.obs.status).empty()) << flotilla::to_string(state);
  }
  report_all(h, flotilla::PodState::kRunning, 1, 5);
  h.obs.pods[1].report->peak_bytes = predicted + 1'000'000'000;
  h.apply(h.step());
  EXPECT_EQ(fo::MemoryHeadroom::from_status(h.obs.status).types.size(), 1u) << "measured while Running: learned";
}

// Under strict elasticity the data-parallel degree is the job's: after an OOM nothing within the
// learned headroom fits the 4 GPUs at D 4, so the job waits, and Planned says the headroom is why.
TEST(JobReconciler, AJobThatLearnedHeadroomSaysSoWhenNothingFits) {
  Harness h;
  h.world.catalog = catalog_of_64_mb_gpus();  // n0 and n1 only: no emu-roomy node
  admit_and_lift_barrier(h, 4);
  ASSERT_EQ(h.obs.status["plan"].value("dp", 0), 4);
  report_all(h, flotilla::PodState::kDegraded, 1, 0, "out of GPU memory in the forward pass ...");
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Pending");
  EXPECT_EQ(condition(h.obs.status, "Planned").rfind("False/", 0), 0u) << h.obs.status.dump();
  const std::string message = condition_message(h.obs.status, "Planned");
  EXPECT_NE(message.find("planned with the memory headroom the job's workers showed, per rank: emu-slow "),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("recompute"), std::string::npos) << message;
}


// A world in one pod: its sidecar does not restart an OOM locally (it reports it at once,
// restarts 0), and the operator re-plans it; a sidecar that gave up after local restarts on an
// OOM (an older sidecar) is re-planned too, not failed. When the job finally fails, the Failed
// condition names the headroom it keeps.
TEST(JobReconciler, AOnePodWorldOutOfMemoryIsRePlannedNotFailed) {
  Harness h;
  h.world.catalog = catalog_of_64_mb_gpus();
  add_roomy_node(h);
  h.obs.spec = spec_of(job_object(R"({"elasticity": {"mode": "relaxed"}, "backoffLimit": 1})"));
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  h.obs.decision.reset();
  ASSERT_EQ(h.obs.pods.size(), 1u);
  h.report(h.obs.pods[0], flotilla::PodState::kDegraded, 1);
  h.obs.pods[0].report->message = "flotilla-worker rank 0: error: out of GPU memory in the forward pass";
  h.obs.pods[0].report->restarts = 1;  // as an older sidecar that restarted it once
  h.apply(h.step());
  EXPECT_EQ(h.phase(), "Rescaling") << h.obs.status.dump();
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/OutOfMemory");
  EXPECT_EQ(h.epoch(), 2);
  ASSERT_EQ(fo::MemoryHeadroom::from_status(h.obs.status).types.size(), 1u);
  // The second failure in a row without progress exceeds backoffLimit 1: Failed, and the
  // condition says what the job keeps.
  h.obs.now = "2026-11-24T00:01:00Z";
  for (fo::PodObservation& p : h.obs.pods) {
    if (p.deleting) continue;
    h.report(p, flotilla::PodState::kDegraded, 2);
    p.report->message = "cannot open loss log";
  }
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Failed") << h.obs.status.dump();
  EXPECT_NE(condition_message(h.obs.status, "Failed").find("Memory headroom learned from the workers"),
            std::string::npos)
      << condition_message(h.obs.status, "Failed");
}

// Headroom holds for the model it was learned with: a spec that trains another model starts
// without it.
TEST(JobReconciler, HeadroomLearnedForAnotherModelIsDropped) {
  Harness h;
  fo::MemoryHeadroom learned;
  learned.set({"emu-slow", 1'000'000, "OutOfMemory", "", 1, "small|flotilla"});
  h.obs.status["memoryHeadroom"] = learned.to_status();
  h.obs.status["phase"] = "Pending";
  h.apply(h.step());
  EXPECT_EQ(fo::MemoryHeadroom::from_status(h.obs.status).signature(), "emu-slow=1000000") << "same model: kept";
  h.obs.spec = spec_of(job_object(R"({"model": "tiny"})"));
  h.apply(h.step());
  EXPECT_FALSE(h.obs.status.contains("memoryHeadroom")) << h.obs.status.dump();
}

// One Pending pod must not hold the others hostage (DESIGN.md): a pod still not started
// spec.elasticity.podStartTimeoutSeconds after the plan is left behind, the job re-planned on the
// pods that did start, and its node kept out of the job's plans for 10 minutes.
TEST(JobReconciler, APodThatDoesNotStartInTimeIsLeftBehindAndItsNodeAvoided) {
  Harness h;
  admit_with_start_timeout(h);
  h.obs.decision.reset();
  ASSERT_EQ(h.obs.pods.size(), 2u);
  fo::PodObservation& up = h.obs.pods[0];
  const std::string stuck = h.obs.pods[1].name, stuck_node = h.obs.pods[1].node;
  h.report(up, flotilla::PodState::kWaiting, 1);
  h.obs.pods[1].waiting_reason = "ErrImagePull: pull access denied for w";
  // 30 s in: still waiting, saying which pod and when it will be left behind; woken at the deadline.
  h.obs.now = "2026-11-24T00:00:30Z";
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1);
  EXPECT_EQ(condition(h.obs.status, "Running"), "False/WaitingForPods");
  const std::string waiting = condition_message(h.obs.status, "Running");
  EXPECT_NE(waiting.find(stuck + " (Pending: ErrImagePull: pull access denied for w)"), std::string::npos) << waiting;
  EXPECT_NE(waiting.find("left behind"), std::string::npos) << waiting;
  ASSERT_TRUE(a.requeue_after_seconds);
  EXPECT_DOUBLE_EQ(*a.requeue_after_seconds, 30);
  // 60 s after the plan: re-planned on the 2 GPUs that started, the stuck pod deleted.
  h.obs.now = "2026-11-24T00:01:00Z";
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(h.barrier(), 1) << "the survivor restarts behind the barrier";
  EXPECT_EQ(h.phase(), "Rescaling");
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/PodStartTimeout");
  EXPECT_EQ(h.obs.status["plan"].value("gpus", 0), 2);
  for (const auto& pod : h.obs.status["plan"]["pods"]) EXPECT_NE(pod.value("node", ""), stuck_node);
  EXPECT_EQ(a.remove, std::vector<std::string>{stuck});
  ASSERT_EQ(a.events.size(), 2u);  // Planned, PodStartTimeout
  EXPECT_EQ(a.events[1].reason, "PodStartTimeout");
  EXPECT_NE(a.events[1].message.find(stuck + " (Pending: ErrImagePull"), std::string::npos) << a.events[1].message;
  ASSERT_EQ(h.obs.status["unavailableNodes"].size(), 1u);
  const auto entry = h.obs.status["unavailableNodes"][0];
  EXPECT_EQ(entry.value("node", ""), stuck_node);
  EXPECT_EQ(entry.value("reason", ""), "PodStartTimeout");
  EXPECT_EQ(entry.value("until", ""), "2026-11-24T00:11:00Z") << "10 minutes after it was left behind";
  // The survivor restarts alone.
  h.remove_deleted();
  h.report(h.obs.pods[0], flotilla::PodState::kStopped, 2);
  h.apply(h.step());
  EXPECT_EQ(h.barrier(), 2);
  // Until the entry expires, a grow cannot use the node; from then it can.
  h.report(h.obs.pods[0], flotilla::PodState::kRunning, 2, 10);
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");
  h.obs.now = "2026-11-24T00:11:00Z";
  h.obs.decision = decision(fs::AllocAction::kGrow, 4, "BenefitCheckPassed");
  a = h.step();
  h.apply(a);
  ASSERT_EQ(h.obs.status["unavailableNodes"].size(), 1u) << "remembered for an hour, no longer in force";
  EXPECT_EQ(h.epoch(), 3);
  EXPECT_EQ(h.obs.status["plan"].value("gpus", 0), 4);
}

// While the plan's entry is in force, a re-plan leaves the node out and says so when that is why
// nothing fits.
TEST(JobReconciler, AnUnavailableNodeIsLeftOutOfPlansUntilItsTime) {
  Harness h;
  h.obs.now = "2026-11-24T00:00:00Z";
  h.obs.status["unavailableNodes"] = {
      {{"node", "n1"}, {"reason", "PodStartTimeout"}, {"message", "m"}, {"until", "2026-11-24T00:10:00Z"}},
      {{"node", "n0"}, {"until", "not a time"}}};
  h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
  auto a = h.step();
  h.apply(a);
  ASSERT_EQ(h.obs.status["unavailableNodes"].size(), 1u) << "the malformed entry is dropped";
  ASSERT_EQ(a.create.size(), 1u);
  EXPECT_EQ(a.create[0].pod.node, "n0");
  // Only n1 is left and it is out: nothing fits, and the condition says why.
  Harness g;
  g.cluster.nodes = {node("n1", 2)};
  g.obs.now = h.obs.now;
  g.obs.status["unavailableNodes"] = {{{"node", "n1"}, {"until", "2026-11-24T00:10:00Z"}}};
  g.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  g.apply(g.step());
  EXPECT_EQ(condition(g.obs.status, "Planned").substr(0, 6), "False/");
  EXPECT_NE(condition_message(g.obs.status, "Planned").find("n1 until 2026-11-24T00:10:00Z"), std::string::npos)
      << condition_message(g.obs.status, "Planned");
}

// Nothing to re-plan around: when no pod has started (an image no node can pull), or the job
// cannot run without the stuck pod's node (strict: D 4 needs all 4 GPUs), it keeps waiting, and
// the condition says why; with a timeout of 0 it waits without a deadline.
TEST(JobReconciler, AGangWithNothingToRePlanAroundKeepsWaiting) {
  for (const char* timeout : {"0", "60"}) {
    Harness h;
    h.obs.spec = spec_of(job_object(std::string(R"({"elasticity": {"podStartTimeoutSeconds": )") + timeout + "}}"));
    h.obs.now = "2026-11-24T00:00:00Z";
    h.obs.decision = decision(fs::AllocAction::kAdmit, 4);
    h.apply(h.step());
    h.obs.decision.reset();
    ASSERT_EQ(h.obs.pods.size(), 2u);
    ASSERT_EQ(h.obs.status["plan"].value("dp", 0), 4) << "strict, admitted at D 4";
    h.obs.now = "2026-11-24T01:00:00Z";
    auto a = h.step();
    h.apply(a);
    EXPECT_EQ(h.epoch(), 1) << timeout;
    EXPECT_FALSE(a.requeue_after_seconds);
    std::string message = condition_message(h.obs.status, "Running");
    if (std::string(timeout) == "0") {
      EXPECT_EQ(message.find("left behind"), std::string::npos) << message;
      continue;
    }
    EXPECT_NE(message.find("no pod of this epoch has started in 60 s"), std::string::npos) << message;
    h.report(h.obs.pods[0], flotilla::PodState::kWaiting, 1);
    a = h.step();
    h.apply(a);
    EXPECT_EQ(h.epoch(), 1);
    EXPECT_FALSE(h.obs.status.contains("unavailableNodes"));
    message = condition_message(h.obs.status, "Running");
    EXPECT_NE(message.find(h.obs.pods[1].name + " (Pending: its containers have not started) did not start in 60 s, "
                                                "and without its node the job cannot go on, so it waits"),
              std::string::npos)
        << message;
  }
}

// A pod whose sidecar reported under the old epoch is stopping its workers (within their stop
// grace, which may be longer than the timeout): it is not stuck.
TEST(JobReconciler, APodStillStoppingOldWorkersIsNotLeftBehind) {
  Harness h;
  admit_with_start_timeout(h);
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kWaiting, 1);
  h.apply(h.step());
  for (auto& p : h.obs.pods) h.report(p, flotilla::PodState::kRunning, 1, 5);
  h.obs.decision = decision(fs::AllocAction::kShrink, 2, "Preempted");
  h.obs.now = "2026-11-24T00:01:00Z";
  h.apply(h.step());
  h.obs.decision.reset();
  ASSERT_EQ(h.epoch(), 2);
  h.obs.now = "2026-11-24T00:30:00Z";
  const auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_FALSE(h.obs.status.contains("unavailableNodes"));
  const std::string message = condition_message(h.obs.status, "Running");
  EXPECT_NE(message.find("its sidecar is still on epoch 1"), std::string::npos) << message;
}

// A plan pod not created because the job's own old pod still holds its node (stopping its
// workers at a checkpoint, which may take longer than the timeout) waits for that pod, not for
// the node; and a missing pod whose node has room now (a restarted operator) is created, not
// left behind.
TEST(JobReconciler, APodWaitingForTheJobsOwnOldPodIsNotLeftBehind) {
  Harness h;
  admit_with_start_timeout(h);
  h.obs.decision.reset();
  ASSERT_EQ(h.obs.pods.size(), 2u);
  h.report(h.obs.pods[0], flotilla::PodState::kWaiting, 1);
  // n1's plan pod is not created yet: the job's old pod there (another GPU count, another name)
  // still stops its workers, half an hour on (a long stop grace), holding n1's GPUs.
  const std::string planned = h.obs.pods[1].name;
  h.obs.pods[1].name = "demo-n1-old";
  h.obs.pods[1].deleting = true;
  h.obs.pods[1].phase = "Running";
  h.report(h.obs.pods[1], flotilla::PodState::kRunning, 0);
  h.obs.now = "2026-11-24T00:30:00Z";
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1) << condition_message(h.obs.status, "Running");
  EXPECT_FALSE(h.obs.status.contains("unavailableNodes"));
  EXPECT_TRUE(a.create.empty());
  // Gone: the plan pod is created at once, and not left behind in the same reconcile.
  h.remove_deleted();
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1);
  ASSERT_EQ(a.create.size(), 1u);
  EXPECT_EQ(a.create[0].pod.name, planned);
  EXPECT_FALSE(h.obs.status.contains("unavailableNodes"));
  // Created at 00:30: its own 60 s count from there, not from the plan.
  for (auto& p : h.obs.pods)
    if (p.name == planned) p.created = "2026-11-24T00:30:00Z";
  h.obs.now = "2026-11-24T00:30:59Z";
  a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1);
  ASSERT_TRUE(a.requeue_after_seconds);
  EXPECT_DOUBLE_EQ(*a.requeue_after_seconds, 1);
  h.obs.now = "2026-11-24T00:31:00Z";
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/PodStartTimeout");
}

// The allocator counts a shrunk job's leaving pods as free (cluster_view.h), so a plan may put a
// pod where another job's pod still stops: that pod's time counts from when the leaving pod was
// due to be gone (its deletionTimestamp), not from the plan, and one stuck terminating is not
// waited for forever. A pod of another job that stays is what the timeout is for.
TEST(JobReconciler, APodWaitingForAnotherJobsLeavingPodCountsFromWhenItWasDue) {
  for (const bool other_leaving : {true, false}) {
    SCOPED_TRACE(other_leaving ? "the other job's pod is leaving" : "the other job's pod stays");
    Harness h;
    admit_with_start_timeout(h);  // planned at 00:00, timeout 60 s
    h.obs.decision.reset();
    ASSERT_EQ(h.obs.pods.size(), 2u);
    h.report(h.obs.pods[0], flotilla::PodState::kWaiting, 1);
    // n1's plan pod was not created: job "other" (plan epoch 3) holds n1 with a pod being
    // deleted, due at 00:29:30 (shrunk off n1: leaving), or with a pod its plan keeps there.
    const std::string n1 = h.obs.pods[1].node;
    h.obs.pods.pop_back();
    for (fo::NodeView& n : h.cluster.nodes) {
      n.planned_by_job["team/demo"] = 2;
      if (n.name != n1) continue;
      n.held_by_job = {{"team/other", 2}};
      if (other_leaving) {
        n.leaving_due = "2026-11-24T00:29:30Z";
      } else {
        n.staying_by_job_epoch["team/other"][3] = 2;
        n.planned_by_job["team/other"] = 2;
      }
    }
    h.cluster.planned_jobs = {{"team/demo", 1}, {"team/other", 3}};
    h.obs.now = "2026-11-24T00:30:00Z";
    auto a = h.step();
    h.apply(a);
    EXPECT_TRUE(a.create.empty()) << "the kubelet would refuse it: n1's GPUs are held";
    if (!other_leaving) {
      EXPECT_EQ(h.epoch(), 2);
      EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/PodStartTimeout");
      continue;
    }
    EXPECT_EQ(h.epoch(), 1) << condition_message(h.obs.status, "Running");
    EXPECT_FALSE(h.obs.status.contains("unavailableNodes"));
    EXPECT_NE(condition_message(h.obs.status, "Running").find("not created yet: waiting for 2 GPUs on " + n1),
              std::string::npos)
        << condition_message(h.obs.status, "Running");
    ASSERT_TRUE(a.requeue_after_seconds);
    EXPECT_DOUBLE_EQ(*a.requeue_after_seconds, 30) << "woken when 60 s have passed since it was due";
    // Still there a minute after it was due: stuck terminating; the node is left behind.
    h.obs.now = "2026-11-24T00:30:30Z";
    h.apply(h.step());
    EXPECT_EQ(h.epoch(), 2);
    EXPECT_EQ(condition(h.obs.status, "Rescaling"), "True/PodStartTimeout");
  }
}

// The allocator counts free GPUs by type, not whether they help: a granted scale-up whose best
// plan is the running one is declined, once, with no new epoch (before, every worker restarted
// for nothing, again after each minimum interval); once GPUs that help are free, it grows.
TEST(JobReconciler, AScaleUpToTheSamePlanIsDeclinedWithoutARestart) {
  Harness h;
  h.cluster.nodes = {node("n0", 2)};
  h.obs.decision = decision(fs::AllocAction::kAdmit, 2);
  h.apply(h.step());
  ASSERT_EQ(h.obs.pods.size(), 1u);
  h.report(h.obs.pods[0], flotilla::PodState::kRunning, 1, 5);
  h.obs.decision.reset();
  h.apply(h.step());
  ASSERT_EQ(h.phase(), "Running");
  h.obs.decision = decision(fs::AllocAction::kGrow, 4, "BenefitCheckPassed");
  auto a = h.step();
  h.apply(a);
  EXPECT_EQ(h.epoch(), 1) << "the GPUs free to it are the ones it holds: nothing to restart for";
  EXPECT_EQ(h.phase(), "Running");
  EXPECT_TRUE(a.create.empty() && a.remove.empty() && a.annotate.empty());
  const auto last = h.obs.status["lastDecision"];
  EXPECT_EQ(last.value("action", ""), "keep") << last.dump();
  EXPECT_NE(last.value("reason", "")
                .find("a scale-up to 4 GPUs was granted, but the best plan on the GPUs free to "
                      "the job is the one it runs"),
            std::string::npos)
      << last.dump();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].reason, "NoBetterPlan");
  // Recorded with what it was judged on, for the allocator (which then offers the job no
  // scale-up while these hold) and for the next reconcile (which does not plan it again).
  EXPECT_EQ(h.obs.status["declinedScaleUp"],
            nlohmann::json::parse(R"({"epoch": 1, "targetGpus": 4, "freeGpus": {"emu-slow": 0}})"));
  a = h.step();
  EXPECT_TRUE(a.events.empty()) << "said once";
  EXPECT_FALSE(a.status) << "nothing changed";
  // A node that helps joins: the same decision now grows the job.
  h.cluster.nodes.push_back(node("n1", 2));
  h.apply(h.step());
  EXPECT_EQ(h.epoch(), 2);
  EXPECT_EQ(h.obs.status["plan"].value("gpus", 0), 4);
  EXPECT_FALSE(h.obs.status.contains("declinedScaleUp")) << "a new plan clears it";
}
