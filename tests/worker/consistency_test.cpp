// Consistency: a job rescaled mid-training (by pipeline degree, partition or data-parallel
// degree with virtual shards) logs a loss sequence bit-for-bit identical to the uninterrupted
// job. Every run is the real flotilla-worker launcher with real rank processes over TCP.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include "tests/worker/runtime_test_support.h"

namespace flotilla::worker {
namespace {

using namespace testing;

class Consistency : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    data_ = write_text_file(dir_);
  }
  // Runs `flotilla-worker run` with a per-job checkpoint folder and loss log.
  CommandResult run(const std::string& job, const std::string& layout, int steps,
                    const std::string& extra = "") {
    std::string cmd = worker_binary() + " run --model small --data " + data_.string() +
                      " --checkpoint-dir " + (dir_ / ("ck_" + job)).string() + " --loss-log " +
                      (dir_ / ("loss_" + job + ".txt")).string() + " --steps " +
                      std::to_string(steps) + " " + layout + " " + extra;
    return run_command(cmd);
  }
  std::string loss(const std::string& job) { return read_file(dir_ / ("loss_" + job + ".txt")); }

  struct Hop {
    std::string layout;
    int until_step;
  };
  // Runs the uninterrupted job under `base_layout`, then the same job through `hops` (each
  // resumes from the previous hop's checkpoint), and compares the loss logs byte for byte.
  void expect_rescales_match(const std::string& base_layout, const std::vector<Hop>& hops) {
    const int steps = hops.back().until_step;
    auto base = run("base", base_layout, steps);
    ASSERT_EQ(base.exit_code, 0) << base.output;
    for (const Hop& hop : hops) {
      auto r = run("elastic", hop.layout, hop.until_step);
      ASSERT_EQ(r.exit_code, 0) << hop.layout << ": " << r.output;
    }
    EXPECT_EQ(count_lines(dir_ / "loss_base.txt"), steps);
    EXPECT_EQ(loss("elastic"), loss("base"));
  }

  std::filesystem::path dir_, data_;
};

TEST_F(Consistency, PipelineTwoThenThreeUnevenThenOneMatchesUninterrupted) {
  expect_rescales_match("--pp 1", {{"--pp 2", 2}, {"--pp 3 --partition 0:1,1:4,4:6", 4},
                                   {"--pp 1", 6}});
}

TEST_F(Consistency, DataParallelTwoThenFourThenOneWithFourVirtualShards) {
  const std::string v = " --virtual-shards 4";
  expect_rescales_match("--dp 1" + v, {{"--dp 2" + v, 2}, {"--dp 4" + v, 4}, {"--dp 1" + v, 6}});
}

TEST_F(Consistency, MixedPipelineAndDataParallelRescaleMatches) {
  // Both degrees change at once, with uneven partitions.
  const std::string v = " --virtual-shards 4";
  expect_rescales_match("--pp 1 --dp 1" + v, {{"--pp 2 --dp 2 --partition 0:4,4:6" + v, 2},
                                              {"--pp 3 --dp 4 --partition 0:1,1:2,2:6" + v, 4},
                                              {"--pp 1 --dp 2" + v, 6}});
}

TEST_F(Consistency, UninterruptedPipelineOneAndFourAgree) {
  ASSERT_EQ(run("pp1", "--pp 1", 5).exit_code, 0);
  auto r = run("pp4", "--pp 4", 5);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_lines(dir_ / "loss_pp1.txt"), 5);
  EXPECT_EQ(loss("pp4"), loss("pp1"));
}

TEST_F(Consistency, DifferentVirtualShardCountsAreDifferentJobs) {
  // The guarantee is per job: V fixes the gradient summation order. Changing V is allowed to
  // change the low bits, so the test that DP rescaling is exact is not vacuous.
  ASSERT_EQ(run("v1", "--dp 1 --virtual-shards 1", 6).exit_code, 0);
  ASSERT_EQ(run("v4", "--dp 1 --virtual-shards 4", 6).exit_code, 0);
  EXPECT_NE(loss("v1"), loss("v4"));
}

TEST_F(Consistency, SigtermRelaunchUnderANewLayoutLosesNoStep) {
  ASSERT_EQ(run("base", "--pp 1 --dp 1 --virtual-shards 2", 24).exit_code, 0);
  const std::string common = " --model small --data " + data_.string() + " --checkpoint-dir " +
                             (dir_ / "ck_elastic").string() + " --loss-log " +
                             (dir_ / "loss_elastic.txt").string() +
                             " --steps 24 --virtual-shards 2 --progress " +
                             (dir_ / "progress.jsonl").string();
  // The first layout runs in the background; relaunch stops it with SIGTERM after 2 steps
  // (24 steps in all, so even a fast machine is still training when the SIGTERM lands).
  process::Child first = start_shell(worker_binary() + " run --pp 2 --dp 2 " + common + " >/dev/null 2>&1");
  ASSERT_TRUE(first.valid());
  ASSERT_TRUE(wait_until([&] { return count_lines(dir_ / "loss_elastic.txt") >= 2; }));
  auto r = run_command(worker_binary() + " relaunch --pp 3 --dp 1 --partition 0:2,2:3,3:6" +
                       common);
  const process::ExitStatus status = first.wait();
  ASSERT_EQ(status.signal, 0);
  EXPECT_EQ(status.exit_code, 0) << "the stopped launcher must exit 0 after its checkpoint";
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped launcher"), std::string::npos) << r.output;
  std::string progress = read_file(dir_ / "progress.jsonl");
  EXPECT_NE(progress.find("\"stopping\":true"), std::string::npos);
  EXPECT_EQ(loss("elastic"), loss("base"));
}

}  // namespace
}  // namespace flotilla::worker
