// The trainer sidecar end to end: real devcluster, real flotilla-sidecar pods, real worker
// ranks; the test plays the operator. Loss logs are compared byte for byte with an
// uninterrupted `flotilla-worker run` of the same job (model small, seed 1234, batch 4).
#include "tests/trainer-sidecar/sidecar_harness.h"

namespace flotilla::sidecar::testing {
namespace {

class Sidecar : public SidecarCluster {};

TEST_F(Sidecar, OnePodTwoRanksRunsToCompletionBitForBit) {
  const int steps = 8;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps));
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 50s)) << phase("p0");
  auto r = report("p0");
  EXPECT_EQ(r->step, steps);
  EXPECT_EQ(r->last_checkpoint_step, steps);
  EXPECT_GT(r->tokens_per_second, 0);
  EXPECT_EQ(r->stage_seconds.size(), 2u);
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
  EXPECT_TRUE(wait_until([&] { return phase("p0") == "Succeeded"; }, 10s)) << phase("p0");
}


TEST_F(Sidecar, TwoPodsRendezvousAndComplete) {
  const int steps = 8;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0}, steps));
  create_pod("p1", plan(2, {1}, steps));
  ASSERT_TRUE(reports("p0", 1, PodState::kSucceeded, 50s)) << phase("p0");
  ASSERT_TRUE(reports("p1", 1, PodState::kSucceeded, 20s)) << phase("p1");
  EXPECT_EQ(loss(), ref);
  // p1 joined the address p0 published for epoch 1.
  auto pod = client_->get(kube::resources::pods, "default", "p0");
  auto rz = parse_rendezvous(pod->at("metadata").at("annotations").at(kRendezvousAnnotation).get<std::string>());
  ASSERT_TRUE(std::holds_alternative<Rendezvous>(rz));
  EXPECT_EQ(std::get<Rendezvous>(rz).epoch, 1);
}

// One planned rescale: epoch `to.epoch` with the barrier held, Stopped at S, barrier lifted,
// and the first step under the new epoch is step S (0-based), resumed from checkpoint S.
void rescale(Sidecar& t, const PodPlan& to, std::int64_t* stopped_at) {
  PodPlan held = to;
  held.barrier = to.epoch - 1;
  t.patch_plan("p0", held);
  ASSERT_TRUE(t.reports("p0", to.epoch, PodState::kStopped, 30s)) << t.phase("p0");
  auto r = t.report("p0");
  EXPECT_EQ(r->last_checkpoint_step, r->step) << "the stop checkpoints the last completed step";
  *stopped_at = r->step;
  t.patch_plan("p0", to);
  ASSERT_TRUE(wait_until([&] {
    auto now = t.report("p0");
    return now && now->epoch == to.epoch &&
           (now->step > *stopped_at || now->state == PodState::kSucceeded);
  }, 30s));
}

TEST_F(Sidecar, PlannedRescaleTwoToThreeToTwoLosesAndRepeatsNoStep) {
  const int steps = 60;
  const std::string ref = reference_loss(steps);
  create_pod("p0", plan(2, {0, 1}, steps));
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= 3; }, 30s));
  std::int64_t s2 = 0, s3 = 0;
  PodPlan three = plan(3, {0, 1, 2}, steps, "p0", 2);
  three.partition = "0:1,1:4,4:6";
  rescale(*this, three, &s2);
  ASSERT_TRUE(wait_until([&] { auto r = report("p0"); return r && r->step >= s2 + 3; }, 30s));
  rescale(*this, plan(2, {0, 1}, steps, "p0", 3), &s3);
  ASSERT_TRUE(reports("p0", 3, PodState::kSucceeded, 40s)) << phase("p0");
  EXPECT_LT(s2, s3);
  EXPECT_LT(s3, steps) << "the job ended before the second rescale; make it longer";
  EXPECT_EQ(count_lines(dir_ / "loss.txt"), steps);
  EXPECT_EQ(loss(), ref);
  for (auto [epoch, from] : {std::pair<int, std::int64_t>{2, s2}, {3, s3}}) {
    auto starts = progress_events("p0", "progress-e" + std::to_string(epoch));
    ASSERT_FALSE(starts.empty());
    bool first_step_seen = false;
    for (const auto& j : starts) {
      if (j.value("event", "") == "start") EXPECT_EQ(j.value("resumed_from_step", -1), from);
      if (j.value("event", "") == "step" && !first_step_seen) {
        first_step_seen = true;
        EXPECT_EQ(j.value("step", -1), from) << "epoch " << epoch;
      }
    }
    EXPECT_TRUE(first_step_seen);
  }
}

Json start_event(SidecarCluster& t, const std::string& pod, const std::string& file, int rank) {
  for (auto& j : t.progress_events(pod, file))
    if (j.value("event", "") == "start" && j.value("rank", -1) == rank) return j;
  return nullptr;
}
}  // namespace
}  // namespace flotilla::sidecar::testing
