// cluster_view.h: what the allocator and planner may give away (taken()) versus what pods hold
// now (held()), across the moments between a job's new plan and its pods. The expected counts
// are worked out by hand from the node capacities and the pods and plans each case builds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/pod_plan.h"
#include "operator/cluster_view.h"
#include "tests/common/sample_pod_plan.h"
#include "tests/operator/operator_fixture.h"

namespace fo = flotilla::op;
using Json = nlohmann::json;

namespace {

Json node(const std::string& name, int gpus) {
  return {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "emu-slow"}}}}},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// A pod of job `job` (empty: no job) on `node` holding `gpus`, annotated with a plan of `epoch`.
Json pod(const std::string& name, const std::string& job, const std::string& node, int gpus, std::int64_t epoch,
         bool deleting = false) {
  Json p = {{"metadata", {{"name", name}, {"namespace", "team"}}},
            {"spec", {{"nodeName", node}, {"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}},
            {"status", {{"phase", "Running"}}}};
  if (!job.empty()) {
    p["metadata"]["labels"] = {{flotilla::kJobLabel, job}};
    flotilla::PodPlan plan = flotilla::testing::sample_pod_plan();
    plan.epoch = plan.barrier = epoch;
    p["metadata"]["annotations"] = {{flotilla::kPlanAnnotation, flotilla::encode_pod_plan(plan)}};
  }
  if (deleting) p["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z";
  return p;
}

// A TrainingJob in `phase` whose status.plan of `epoch` puts GPUs on nodes.
Json job(const std::string& name, const std::string& phase, std::int64_t epoch,
         const std::vector<std::pair<std::string, int>>& gpus_by_node) {
  Json pods = Json::array();
  for (const auto& [node, gpus] : gpus_by_node)
    pods.push_back({{"name", name + "-" + node}, {"node", node}, {"gpus", gpus}});
  return {{"metadata", {{"name", name}, {"namespace", "team"}}},
          {"status", {{"phase", phase}, {"plan", {{"epoch", epoch}, {"pods", pods}}}}}};
}

class ClusterViewTaken : public ::testing::Test {
 protected:
  fo::ClusterView view(const std::vector<Json>& pods, const std::vector<Json>& jobs) const {
    return fo::build_cluster_view({node("n0", 2), node("n1", 2)}, pods, world.catalog, flotilla::kJobLabel, jobs);
  }
  int free_gpus(const fo::ClusterView& v) const { return v.free_by_type().at("emu-slow"); }
  int held(const fo::ClusterView& v) const { return v.find("n0")->held() + v.find("n1")->held(); }
  fo::testing::World world;
};

// The race the allocator lost: job a shrank 4 -> 3 (epoch 3) for a waiting job; until its
// old pod on n1 is gone, pods still hold 4 GPUs. The allocator must see the GPU a gave back,
// or it preempts a again, and again, for the same GPU.
TEST_F(ClusterViewTaken, AShrunkJobsLeavingPodIsFreeBeforeItIsGone) {
  const auto v = view({pod("a-n0", "a", "n0", 2, 3), pod("a-n1-g2", "a", "n1", 2, 2, /*deleting=*/true)},
                      {job("a", "Rescaling", 3, {{"n0", 2}, {"n1", 1}})});
  EXPECT_EQ(held(v), 4);       // the kubelet's view: a new pod on n1 waits
  EXPECT_EQ(free_gpus(v), 1);  // the allocator's: 4 - 3 planned
  EXPECT_EQ(v.find("n1")->held(), 2);
  EXPECT_EQ(v.free_on(*v.find("n1")), 1);
  EXPECT_EQ(v.find("n1")->leaving_due, "2026-11-24T00:00:00Z") << "when the leaving pod was due to be gone";
  EXPECT_EQ(v.find("n0")->leaving_due, "");
  // Not yet deleted (the plan is written, the reconcile has not acted): the pod's epoch (2)
  // is older than the plan's (3), so it is leaving too.
  const auto before_delete = view({pod("a-n0", "a", "n0", 2, 3), pod("a-n1-g2", "a", "n1", 2, 2)},
                                  {job("a", "Rescaling", 3, {{"n0", 2}, {"n1", 1}})});
  EXPECT_EQ(free_gpus(before_delete), 1);
}

// The other half: job a grew 1 -> 4 (epoch 2) and its new pods are not created yet. The GPUs its
// plan took are not free to another job, though no pod holds them.
TEST_F(ClusterViewTaken, AGrownJobsPodsToBeCreatedAreTaken) {
  const auto v = view({pod("a-n0-g1", "a", "n0", 1, 1)}, {job("a", "Rescaling", 2, {{"n0", 2}, {"n1", 2}})});
  EXPECT_EQ(held(v), 1);
  EXPECT_EQ(free_gpus(v), 0);
  // The job's own snapshot offers it what its plan takes: all four GPUs.
  const auto own = v.snapshot_for("team/a");
  int own_gpus = 0;
  for (const auto& n : own.nodes) own_gpus += n.gpus;
  EXPECT_EQ(own_gpus, 4);
  EXPECT_TRUE(v.snapshot_for("team/b").nodes.empty());
}

// The caches are separate watches: a's new pods (epoch 2) may be seen before its new plan. They
// count, so the GPUs are not handed to another job in between.
TEST_F(ClusterViewTaken, NewPodsSeenBeforeTheirPlanAreTaken) {
  const auto v =
      view({pod("a-n0-g1", "a", "n0", 1, 1), pod("a-n1-g2", "a", "n1", 2, 2)}, {job("a", "Running", 1, {{"n0", 1}})});
  EXPECT_EQ(free_gpus(v), 1);  // n0: 1 of 2 taken; n1: both held by a pod newer than the plan
  EXPECT_EQ(v.free_on(*v.find("n1")), 0);
}

// Pods of no job, of a finished job, and of a job the cache does not know (deleted, its pods not
// yet collected) hold what they hold; a live job with no plan (requeued) takes only its pods
// that are not being deleted.
TEST_F(ClusterViewTaken, PodsOutsideALivePlanHoldWhatTheyHold) {
  const auto v = view({pod("other", "", "n0", 1, 0), pod("done-n0", "done", "n0", 1, 4),
                       pod("gone-n1", "gone", "n1", 1, 2), pod("queued-n1", "queued", "n1", 1, 5, /*deleting=*/true)},
                      {job("done", "Failed", 4, {{"n0", 1}}), job("queued", "Pending", 5, {})});
  EXPECT_EQ(v.free_on(*v.find("n0")), 0);  // 2 - other - done's pod
  EXPECT_EQ(v.free_on(*v.find("n1")), 1);  // 2 - gone's pod; queued's pod is leaving
  EXPECT_EQ(v.find("n1")->held(), 2);
}

// Requeued: the plan of epoch 5 has no pods and its reconcile is deleting every pod of epoch 5
// or before; until the pod cache shows the deletes, those pods are leaving, not taken. A pod of
// a later epoch (admitted again, its plan not yet seen) is taken.
TEST_F(ClusterViewTaken, ARequeuedJobsPodsAreLeavingBeforeTheirDeleteIsSeen) {
  const auto v = view({pod("q-n0", "q", "n0", 2, 5), pod("q-n1", "q", "n1", 2, 6)}, {job("q", "Pending", 5, {})});
  EXPECT_EQ(v.free_on(*v.find("n0")), 2);
  EXPECT_EQ(v.free_on(*v.find("n1")), 0);
  EXPECT_EQ(held(v), 4);
}

// A job whose spec the operator refused (edited into nonsense while it ran) is not allocated
// for: its plan takes nothing, and its pods hold what they hold, so the GPUs come back when its
// pods end instead of staying taken until someone fixes the spec.
TEST_F(ClusterViewTaken, AJobWithARefusedSpecTakesOnlyWhatItsPodsHold) {
  Json refused = job("r", "Running", 2, {{"n0", 2}, {"n1", 2}});
  refused["metadata"]["generation"] = 2;
  refused["status"]["conditions"] = {
      {{"type", "Planned"}, {"status", "False"}, {"reason", "InvalidSpec"}, {"observedGeneration", 2}}};
  EXPECT_EQ(free_gpus(view({pod("r-n0", "r", "n0", 2, 2)}, {refused})), 2);
  // Refused for an older generation (the spec was fixed since): live again.
  refused["metadata"]["generation"] = 3;
  EXPECT_EQ(free_gpus(view({pod("r-n0", "r", "n0", 2, 2)}, {refused})), 0);
  refused["metadata"]["generation"] = 2;
  refused["status"]["conditions"][0]["reason"] = "WaitingForGpus";
  EXPECT_EQ(free_gpus(view({pod("r-n0", "r", "n0", 2, 2)}, {refused})), 0);
}

// A plan without an epoch is no plan to the reconciler (JobPlan::from_status), so not to the
// view either: the job's pods count as they stand.
TEST_F(ClusterViewTaken, APlanWithoutAnEpochIsNoPlan) {
  Json j = job("a", "Running", 2, {{"n0", 2}, {"n1", 2}});
  j["status"]["plan"].erase("epoch");
  EXPECT_EQ(free_gpus(view({pod("a-n0", "a", "n0", 2, 2)}, {j})), 2);
}

// The cluster pass judges the jobs of one read of the job cache: with_plans_of() puts that read's
// plans on the snapshot's view, dropping the snapshot's own (older or newer) plans.
TEST_F(ClusterViewTaken, WithPlansOfReplacesTheSnapshotsPlans) {
  const auto snapshot = view({pod("a-n0", "a", "n0", 2, 1)}, {job("a", "Running", 1, {{"n0", 2}})});
  EXPECT_EQ(free_gpus(snapshot), 2);
  // Read again: a grew onto n1 (epoch 2, pods not created yet), and b was admitted on none yet.
  const auto pass =
      fo::with_plans_of(snapshot, {job("a", "Rescaling", 2, {{"n0", 2}, {"n1", 2}}), job("b", "Pending", 0, {})});
  EXPECT_EQ(free_gpus(pass), 0);
  EXPECT_EQ(pass.planned_jobs.size(), 2u);
  EXPECT_EQ(held(pass), 2) << "what pods hold is kept";
  // A job gone from the read (deleted) takes what its pods hold, not its old plan.
  const auto gone = fo::with_plans_of(view({}, {job("a", "Running", 1, {{"n0", 2}})}), {});
  EXPECT_EQ(free_gpus(gone), 4);
}

// A view built without jobs (the reconciler's hand-built tests, old callers) is the pods' view.
TEST_F(ClusterViewTaken, WithoutJobsTakenIsHeld) {
  const auto v = view({pod("a-n0", "a", "n0", 2, 3), pod("a-n1", "a", "n1", 1, 2, /*deleting=*/true)}, {});
  EXPECT_EQ(v.taken(*v.find("n0")), 2);
  EXPECT_EQ(v.taken(*v.find("n1")), 1);
  EXPECT_EQ(free_gpus(v), 1);
}

// A status edited by hand into nonsense reads as no plan, not as an exception in every pass.
TEST_F(ClusterViewTaken, AMalformedStatusReadsAsNoPlan) {
  Json bad = job("a", "Running", 2, {{"n0", 2}});
  bad["status"]["phase"] = 7;
  bad["status"]["plan"]["pods"][0]["node"] = Json::array();
  bad["status"]["plan"]["pods"].push_back("not a pod");
  bad["status"]["plan"]["epoch"] = "two";
  const auto v = view({}, {bad});
  EXPECT_EQ(free_gpus(v), 4);
}

}  // namespace
