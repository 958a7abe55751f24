// PodExpectations: a job's reconcile waits until the pod cache shows what the operator last
// created and deleted, and not longer than the timeout.
#include "operator/pod_expectations.h"

#include <gtest/gtest.h>

namespace fo = flotilla::op;

namespace {

fo::PodObservation pod(const std::string& name, bool deleting = false) {
  fo::PodObservation p;
  p.name = name;
  p.deleting = deleting;
  return p;
}

}  // namespace

TEST(PodExpectations, ACreatedPodMustAppearBeforeTheJobIsReconciledAgain) {
  fo::PodExpectations e(30);
  EXPECT_TRUE(e.satisfied("ns/a", {}, 0)) << "nothing expected";
  e.expect("ns/a", {"a-n0-g1"}, {}, 10);
  EXPECT_FALSE(e.satisfied("ns/a", {}, 10.1)) << "the cache has not seen the new pod";
  EXPECT_TRUE(e.satisfied("ns/b", {}, 10.1)) << "other jobs are not held up";
  EXPECT_TRUE(e.satisfied("ns/a", {pod("a-n0-g1")}, 10.2));
  EXPECT_TRUE(e.satisfied("ns/a", {}, 10.3)) << "satisfied once: dropped";
}

TEST(PodExpectations, ADeletedPodMustBeGoneOrMarkedDeleting) {
  fo::PodExpectations e(30);
  e.expect("ns/a", {"a-n0-g2", "a-n1-g2"}, {"a-n0-g1"}, 0);
  EXPECT_FALSE(e.satisfied("ns/a", {pod("a-n0-g1"), pod("a-n0-g2"), pod("a-n1-g2")}, 1)) << "g1 still looks live";
  EXPECT_TRUE(e.satisfied("ns/a", {pod("a-n0-g1", true), pod("a-n0-g2"), pod("a-n1-g2")}, 1.1));
  e.expect("ns/a", {}, {"a-n1-g2"}, 2);
  EXPECT_TRUE(e.satisfied("ns/a", {pod("a-n0-g2")}, 2.1)) << "no longer listed: gone";
}

TEST(PodExpectations, ALostWatchEventStallsTheJobOnlyUntilTheTimeout) {
  fo::PodExpectations e(30);
  e.expect("ns/a", {"a-n0-g1"}, {}, 100);
  e.expect("ns/a", {"a-n1-g1"}, {}, 120);  // added to, not restarted: the first is 100 s old
  EXPECT_FALSE(e.satisfied("ns/a", {pod("a-n1-g1")}, 129));
  EXPECT_TRUE(e.satisfied("ns/a", {}, 130.5));
}

TEST(PodExpectations, ForgetDropsADeletedJobsExpectations) {
  fo::PodExpectations e(30);
  e.expect("ns/a", {"a-n0-g1"}, {}, 0);
  e.forget("ns/a");
  EXPECT_TRUE(e.satisfied("ns/a", {}, 1));
}
