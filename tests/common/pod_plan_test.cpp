// The operator <-> sidecar annotations: round trips, and refusals that name the field.
#include "common/pod_plan.h"
#include "tests/common/sample_pod_plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace {

flotilla::PodPlan sample_plan() { return flotilla::testing::sample_pod_plan(); }

template <class T>
const T& ok(const std::variant<T, std::string>& v) {
  if (auto* e = std::get_if<std::string>(&v)) ADD_FAILURE() << *e;
  return std::get<T>(v);
}

std::string error_of(const std::variant<flotilla::PodPlan, std::string>& v) {
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
}

}  // namespace

TEST(PodPlan, RoundTripsEveryField) {
  const auto p = sample_plan();
  const auto back = ok(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p)));
  EXPECT_EQ(back.job, p.job);
  EXPECT_EQ(back.epoch, 3);
  EXPECT_EQ(back.barrier, 2);
  EXPECT_EQ(back.partition, p.partition);
  EXPECT_EQ(back.ranks, p.ranks);
  EXPECT_EQ(back.world_size, 6);
  EXPECT_EQ(back.virtual_shards, 4);
  EXPECT_EQ(back.checkpoint_every_steps, 5);
  EXPECT_EQ(back.rendezvous_pod, "demo-w-0");
  EXPECT_EQ(flotilla::encode_pod_plan(back), flotilla::encode_pod_plan(p));
}

// maxLocalRestarts and stopGraceSeconds are optional (an older operator's plan has neither:
// the sidecar's own flag and default hold).
TEST(PodPlan, LocalRestartsAndStopGraceAreOptionalAndBounded) {
  auto p = sample_plan();
  EXPECT_FALSE(ok(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))).max_local_restarts);
  p.max_local_restarts = 0;
  EXPECT_EQ(ok(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))).max_local_restarts, 0);
  p.max_local_restarts = -1;
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))),
            "flotilla.io/plan: maxLocalRestarts must be at least 0");
  p.max_local_restarts.reset();
  p.stop_grace_seconds = 300;
  EXPECT_EQ(ok(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))).stop_grace_seconds, 300);
  p.stop_grace_seconds = 0;
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))),
            "flotilla.io/plan: stopGraceSeconds must be at least 1");
}

// What the operator relaunches on: any launch field, never the epoch or barrier alone.
TEST(PodPlan, LaunchDifferencesNameEachChangedFieldButNotEpochOrBarrier) {
  const auto launched = sample_plan();
  auto wanted = launched;
  wanted.epoch = launched.epoch + 1;
  wanted.barrier = launched.epoch + 1;
  EXPECT_TRUE(flotilla::launch_differences(launched, wanted).empty()) << "a new epoch alone is no launch change";
  wanted.train_steps = launched.train_steps + 100;
  wanted.data_path = "/data/other.txt";
  wanted.stop_grace_seconds = 45;
  const std::vector<std::string> diff = flotilla::launch_differences(launched, wanted);
  ASSERT_EQ(diff.size(), 2u) << "stopGraceSeconds, unset in the launched plan (an older operator's), is none";
  EXPECT_EQ(diff[0], "data: \"" + launched.data_path + "\" -> \"/data/other.txt\"");
  EXPECT_EQ(diff[1], "trainSteps: " + std::to_string(launched.train_steps) + " -> " +
                         std::to_string(launched.train_steps + 100));
  const std::vector<std::string> back = flotilla::launch_differences(wanted, launched);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[1], "stopGraceSeconds: 45 -> (unset)");
}

TEST(PodPlan, MalformedPlansAreRefusedNamingTheField) {
  EXPECT_EQ(error_of(flotilla::parse_pod_plan("{")), "flotilla.io/plan: not JSON");
  EXPECT_EQ(error_of(flotilla::parse_pod_plan("[1]")), "flotilla.io/plan: must be a JSON object");
  auto j = flotilla::encode_pod_plan(sample_plan());
  auto without = [&](const std::string& key) {
    auto o = nlohmann::json::parse(j);
    o.erase(key);
    return o.dump();
  };
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(without("ranks"))), "flotilla.io/plan: missing field 'ranks'");
  auto bad = nlohmann::json::parse(j);
  bad["epoch"] = "3";
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(bad.dump())), "flotilla.io/plan: field 'epoch' must be an integer");
  bad = nlohmann::json::parse(j);
  bad["worldSize"] = 5;
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(bad.dump())),
            "flotilla.io/plan: worldSize must be pp x dp x tp, each at least 1");
  bad = nlohmann::json::parse(j);
  bad["ranks"] = {0, 6};
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(bad.dump())), "flotilla.io/plan: rank outside 0..worldSize-1");
  bad = nlohmann::json::parse(j);
  bad["barrier"] = 4;
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(bad.dump())),
            "flotilla.io/plan: barrier must be between 0 and the epoch");
}

// A megatron pod is one torchrun agent: the sidecar derives --node-rank ranks[0] / |ranks| and
// --nnodes worldSize / |ranks|, which only mean something for consecutive, aligned ranks.
TEST(PodPlan, AMegatronPlanNeedsItsArgsAndAlignedConsecutiveRanks) {
  flotilla::PodPlan p = sample_plan();  // world 6
  p.worker_kind = "megatron";
  p.megatron_args = {"/m/pretrain_gpt.py", "--seq-length", "32"};
  const auto back = ok(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p)));  // ranks 3, 4, 5
  EXPECT_EQ(back.megatron_args, p.megatron_args);
  const std::string ranks_line =
      "flotilla.io/plan: ranks of a megatron pod must be consecutive, start at a multiple of their count and divide "
      "worldSize";
  for (const std::vector<int>& ranks :
       {std::vector<int>{2, 3, 4}, std::vector<int>{3, 5}, std::vector<int>{0, 1, 2, 3}}) {
    p.ranks = ranks;
    EXPECT_EQ(error_of(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))), ranks_line) << ranks.size();
  }
  p.ranks = {3, 4, 5};
  p.megatron_args.clear();
  EXPECT_EQ(error_of(flotilla::parse_pod_plan(flotilla::encode_pod_plan(p))),
            "flotilla.io/plan: megatronArgs must hold the script and its flags for workerKind megatron");
}

TEST(PodReport, RoundTripsAndRefusesUnknownStates) {
  flotilla::PodReport r;
  r.epoch = 4;
  r.state = flotilla::PodState::kStopped;
  r.step = 17;
  r.loss = 3.25;
  r.tokens_per_second = 1234.5;
  r.last_checkpoint_step = 17;
  r.stage_seconds = {{0, 0.01, 0.02}, {1, 0.015, 0.03}};
  r.message = "";
  r.peak_bytes = 5'000'000'000;
  const auto back = ok(flotilla::parse_pod_report(flotilla::encode_pod_report(r)));
  EXPECT_EQ(back.peak_bytes, 5'000'000'000);
  EXPECT_EQ(ok(flotilla::parse_pod_report(R"({"epoch":1,"state":"Running"})")).peak_bytes, 0) << "absent: not measured";
  EXPECT_EQ(back.state, flotilla::PodState::kStopped);
  EXPECT_EQ(back.step, 17);
  EXPECT_EQ(back.last_checkpoint_step, 17);
  ASSERT_EQ(back.stage_seconds.size(), 2u);
  EXPECT_EQ(back.stage_seconds[1].backward_s, 0.03);
  auto bad = std::get<std::string>(flotilla::parse_pod_report(R"({"epoch":1,"state":"Sleeping"})"));
  EXPECT_EQ(bad, "flotilla.io/report: unknown state 'Sleeping'");
}

TEST(Rendezvous, RoundTripsAndRefusesBadPorts) {
  const auto rv = ok(flotilla::parse_rendezvous(flotilla::encode_rendezvous({7, "127.0.0.1", 41000})));
  EXPECT_EQ(rv.epoch, 7);
  EXPECT_EQ(rv.port, 41000);
  EXPECT_EQ(std::get<std::string>(flotilla::parse_rendezvous(R"({"epoch":1,"addr":"x","port":0})")),
            "flotilla.io/rendezvous: port must be 1..65535");
}
