// Whose checkpoint folder is whose: the first job to name a folder owns it.
#include "operator/checkpoint_claims.h"

#include <gtest/gtest.h>

#include "operator_fixture.h"

namespace fo = flotilla::op;
using fo::testing::job_object;
using fo::testing::spec_of;

namespace {

nlohmann::json job(const std::string& name, const std::string& created, const std::string& extra = "",
                   const std::string& ns = "team") {
  nlohmann::json j = job_object(extra);
  j["metadata"]["name"] = name;
  j["metadata"]["namespace"] = ns;
  j["metadata"]["creationTimestamp"] = created;
  return j;
}

}  // namespace

TEST(CheckpointClaims, TheFirstJobToNameAFolderOwnsIt) {
  const auto a = job("a", "2026-11-24T10:00:00Z");
  const auto b = job("b", "2026-11-24T10:00:05Z", R"({"checkpoint": {"path": "/ckpt/"}})");  // same folder
  const auto c = job("c", "2026-11-24T09:00:00Z", R"({"checkpoint": {"path": "/other"}})");
  fo::CheckpointClaims claims;
  for (const auto& j : {b, a, c}) claims.add(j);  // the cache's order does not matter
  EXPECT_EQ(claims.owner_of(spec_of(a)), "");
  EXPECT_EQ(claims.owner_of(spec_of(b)), "team/a");
  EXPECT_EQ(claims.owner_of(spec_of(c)), "");
}

TEST(CheckpointClaims, SameSecondGoesByNameAndADeletedOwnerReleasesTheFolder) {
  auto x = job("x", "2026-11-24T10:00:00Z");
  const auto y = job("y", "2026-11-24T10:00:00Z");
  fo::CheckpointClaims claims;
  claims.add(y);
  claims.add(x);
  EXPECT_EQ(claims.owner_of(spec_of(y)), "team/x");
  EXPECT_EQ(claims.owner_of(spec_of(x)), "");
  x["metadata"]["deletionTimestamp"] = "2026-11-24T11:00:00Z";
  fo::CheckpointClaims after;
  after.add(x);
  after.add(y);
  EXPECT_EQ(after.owner_of(spec_of(y)), "") << "deleting x and applying y takes its checkpoints over";
}

TEST(CheckpointClaims, AVolumeIsTheNamespacesOwnStorage) {
  const std::string pvc =
      R"({"checkpoint": {"path": "/ckpt", "volume": {"persistentVolumeClaim": {"claimName": "c"}}}})";
  const auto a = job("a", "2026-11-24T10:00:00Z", pvc, "team-a");
  const auto b = job("b", "2026-11-24T10:00:05Z", pvc, "team-b");
  const auto shared = job("s", "2026-11-24T10:00:07Z", "", "team-b");  // /ckpt on every node
  const auto a2 = job("a2", "2026-11-24T10:00:09Z", pvc, "team-a");
  fo::CheckpointClaims claims;
  for (const auto& j : {a, b, shared, a2}) claims.add(j);
  EXPECT_EQ(claims.owner_of(spec_of(b)), "") << "another namespace's claim of the same name";
  EXPECT_EQ(claims.owner_of(spec_of(shared)), "") << "a node path is not the volume's folder";
  EXPECT_EQ(claims.owner_of(spec_of(a2)), "team-a/a");
}

TEST(CheckpointClaims, AnyOtherClaimantIsSeenAndAMissingNamespaceIsDefault) {
  auto a = job("a", "2026-11-24T10:00:00Z");
  a["metadata"].erase("namespace");
  const auto b = job("b", "2026-11-24T10:00:05Z");
  fo::CheckpointClaims claims;
  claims.add(a);
  claims.add(b);
  EXPECT_EQ(claims.owner_of(spec_of(a)), "") << "not owned by itself";
  EXPECT_EQ(claims.other_claimant(spec_of(a)), "team/b") << "a later claimant is still another job";
  EXPECT_EQ(claims.other_claimant(spec_of(b)), "default/a");
}
