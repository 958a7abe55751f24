// SIGKILL during a checkpoint write: the half-written checkpoint is never loaded, the next
// start resumes from the previous complete one, and the loss sequence still matches the
// uninterrupted job bit-for-bit (at most the steps since that checkpoint are redone).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/worker/runtime_test_support.h"

namespace flotilla::worker {
namespace {

using namespace testing;
namespace fs = std::filesystem;

// Pids of the ranks from their "start" progress events.
std::map<int, pid_t> rank_pids(const fs::path& progress) {
  std::map<int, pid_t> pids;
  std::stringstream ss(read_file(progress));
  std::string line;
  while (std::getline(ss, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "start")
      pids[j["rank"].get<int>()] = j["pid"].get<pid_t>();
  }
  return pids;
}

void kill_rank_mid_checkpoint(int victim_rank) {
  auto dir = fresh_dir("kill_rank" + std::to_string(victim_rank));
  auto data = write_text_file(dir);
  auto job = [&](const std::string& name) {
    return " --model small --pp 2 --checkpoint-every 2 --steps 8 --data " + data.string() +
           " --checkpoint-dir " + (dir / ("ck_" + name)).string() + " --loss-log " +
           (dir / ("loss_" + name + ".txt")).string();
  };
  ASSERT_EQ(run_command(worker_binary() + " run" + job("base")).exit_code, 0);

  // Every writer sleeps 60 s after its first unit file of the step-4 checkpoint.
  const fs::path progress = dir / "progress.jsonl";
  const std::string cmd = "FLOTILLA_TEST_CKPT_PAUSE=4:1:60000 exec " + worker_binary() + " run" +
                          job("elastic") + " --progress " + progress.string() + " >" +
                          (dir / "first.log").string() + " 2>&1";
  pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    ::_exit(127);
  }
  const fs::path partial = dir / "ck_elastic" / "step_00000004";
  ASSERT_TRUE(wait_until([&] {
    return fs::exists(partial / "unit_0000.bin") && fs::exists(partial / "unit_0003.bin");
  })) << read_file(dir / "first.log");
  auto pids = rank_pids(progress);
  ASSERT_EQ(pids.size(), 2U);
  ASSERT_EQ(::kill(pids[victim_rank], SIGKILL), 0);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::string first_log = read_file(dir / "first.log");
  EXPECT_NE(first_log.find("rank " + std::to_string(victim_rank) + " failed"), std::string::npos)
      << first_log;
  EXPECT_NE(first_log.find("killed by signal 9"), std::string::npos) << first_log;
  EXPECT_FALSE(fs::exists(partial / "DONE"));
  EXPECT_TRUE(fs::exists(dir / "ck_elastic" / "step_00000002" / "DONE"));

  // The next start resumes from step 2 and finishes the job.
  auto again = run_command(worker_binary() + " run" + job("elastic") + " --progress " +
                           (dir / "progress2.jsonl").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(read_file(dir / "progress2.jsonl").find("\"resumed_from_step\":2"), std::string::npos);
  EXPECT_TRUE(fs::exists(partial / "DONE"));
  EXPECT_EQ(read_file(dir / "loss_elastic.txt"), read_file(dir / "loss_base.txt"));
}

TEST(Kill, SigkillOfTheCoordinatingRankMidCheckpointFallsBackToThePreviousOne) {
  kill_rank_mid_checkpoint(0);
}

TEST(Kill, SigkillOfAnotherWriterMidCheckpointFallsBackToThePreviousOne) {
  kill_rank_mid_checkpoint(1);
}

}  // namespace
}  // namespace flotilla::worker
