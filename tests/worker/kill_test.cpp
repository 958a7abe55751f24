// SIGKILL during a checkpoint write: the half-written checkpoint is never loaded, the next
// start resumes from the previous complete one, and the loss sequence still matches the
// uninterrupted job bit-for-bit (at most the steps since that checkpoint are redone).
// A rank that dies mid-training ends the job promptly (its peers see the closed connection),
// and a rank that hangs (SIGSTOP) ends it within the receive timeout plus the kill grace.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "process/spawn.h"
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

// The small model's job with `layout` ("--pp 2 --steps 8"), a checkpoint every 2 steps, and
// the checkpoints and loss log of run `name` kept apart in `dir` (ck_<name>, loss_<name>.txt).
std::string job_flags(const std::string& layout, const fs::path& dir, const fs::path& data, const std::string& name) {
  return " --model small " + layout + " --checkpoint-every 2 --data " + data.string() + " --checkpoint-dir " +
         (dir / ("ck_" + name)).string() + " --loss-log " + (dir / ("loss_" + name + ".txt")).string();
}

void kill_rank_mid_checkpoint(int victim_rank) {
  auto dir = fresh_dir("kill_rank" + std::to_string(victim_rank));
  auto data = write_text_file(dir);
  auto job = [&](const std::string& name) { return job_flags("--pp 2 --steps 8", dir, data, name); };
  ASSERT_EQ(run_command(worker_binary() + " run" + job("base")).exit_code, 0);

  // Every writer sleeps 60 s after its first unit file of the step-4 checkpoint.
  const fs::path progress = dir / "progress.jsonl";
  const std::string cmd = "FLOTILLA_TEST_CKPT_PAUSE=4:1:60000 exec " + worker_binary() + " run" +
                          job("elastic") + " --progress " + progress.string() + " >" +
                          (dir / "first.log").string() + " 2>&1";
  process::Child launcher = start_shell(cmd);
  ASSERT_TRUE(launcher.valid());
  const fs::path partial = dir / "ck_elastic" / "step_00000004";
  ASSERT_TRUE(wait_until([&] {
    return fs::exists(partial / "unit_0000.bin") && fs::exists(partial / "unit_0003.bin");
  })) << read_file(dir / "first.log");
  auto pids = rank_pids(progress);
  ASSERT_EQ(pids.size(), 2U);
  ASSERT_EQ(::kill(pids[victim_rank], SIGKILL), 0);
  const process::ExitStatus status = launcher.wait();
  ASSERT_EQ(status.signal, 0);
  EXPECT_EQ(status.exit_code, 1);
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

process::Child start_launcher(const std::string& command) { return start_shell("exec " + command); }

// Highest step of a progress event `event` written by `rank`, or -1.
std::int64_t last_event_step(const fs::path& progress, const std::string& event, int rank) {
  std::int64_t step = -1;
  std::stringstream ss(read_file(progress));
  std::string line;
  while (std::getline(ss, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event && j.value("rank", -1) == rank)
      step = std::max<std::int64_t>(step, j.value("step", std::int64_t{-1}));
  }
  return step;
}

// Sends `signal` to rank `victim` and waits for the launcher; returns its exit code (-1 when
// it did not exit normally) and the seconds from the signal to its exit.
std::pair<int, double> signal_rank_and_wait(process::Child& launcher, pid_t victim, int signal) {
  if (::kill(victim, signal) != 0) return {-2, 0.0};
  const auto sent = std::chrono::steady_clock::now();
  const process::ExitStatus status = launcher.wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  return {status.signal == 0 && !status.unknown ? status.exit_code : -1, seconds};
}

// A hung rank (SIGSTOP: alive, connections open, never answers) must not stall the job: its
// peer's receive times out after --recv-timeout with a line naming the rank and the awaited
// message, and the launcher SIGKILLs the rank that ignores SIGTERM and names it.
TEST(Kill, StoppedRankEndsTheJobWithinTheReceiveTimeout) {
  auto dir = fresh_dir("kill_sigstop");
  auto data = write_text_file(dir);
  const fs::path progress = dir / "progress.jsonl";
  process::Child launcher = start_launcher(worker_binary() + " run --model small --pp 2 --steps 100000 "
                                  "--recv-timeout 1.5 --data " + data.string() +
                                  " --checkpoint-dir " + (dir / "ck").string() + " --progress " +
                                  progress.string() + " >" + (dir / "run.log").string() + " 2>&1");
  ASSERT_GT(launcher.pid(), 0);
  ASSERT_TRUE(wait_until([&] { return last_event_step(progress, "step", 1) >= 1; }))
      << read_file(dir / "run.log");
  auto pids = rank_pids(progress);
  auto [exit_code, seconds] = signal_rank_and_wait(launcher, pids[1], SIGSTOP);
  const std::string log = read_file(dir / "run.log");
  EXPECT_EQ(exit_code, 1) << log;
  // 1.5 s receive timeout + 3 s SIGTERM grace, plus slack for a loaded 2-core machine.
  EXPECT_GE(seconds, 1.5) << log;
  EXPECT_LT(seconds, 15.0) << log;
  EXPECT_NE(log.find("rank 0: error: step "), std::string::npos) << log;
  EXPECT_NE(log.find("timed out after 1.5 s waiting for rank 1 to send"), std::string::npos)
      << log;
  EXPECT_NE(log.find("rank(s) 1 did not stop within 3000 ms of SIGTERM and were killed"),
            std::string::npos)
      << log;
}

// SIGKILL of a rank that writes no checkpoint files (DP replica 1), in the middle of training
// and not during a checkpoint: the other rank sees the closed connection at once (no wait for
// the 300 s default timeout), the launcher names the dead rank, and a restart resumes from the
// last complete checkpoint with the same loss sequence as an uninterrupted run.
TEST(Kill, SigkillOfANonWritingRankMidTrainingStopsThePeersAndARestartResumes) {
  auto dir = fresh_dir("kill_nonwriter");
  auto data = write_text_file(dir);
  auto job = [&](const std::string& name) { return job_flags("--dp 2 --steps 14", dir, data, name); };
  ASSERT_EQ(run_command(worker_binary() + " run" + job("base")).exit_code, 0);

  const fs::path progress = dir / "progress.jsonl";
  process::Child launcher = start_launcher(worker_binary() + " run" + job("elastic") + " --progress " +
                                  progress.string() + " >" + (dir / "run.log").string() + " 2>&1");
  ASSERT_GT(launcher.pid(), 0);
  ASSERT_TRUE(wait_until([&] { return last_event_step(progress, "checkpoint", 0) >= 2; }))
      << read_file(dir / "run.log");
  auto pids = rank_pids(progress);
  auto [exit_code, seconds] = signal_rank_and_wait(launcher, pids[1], SIGKILL);
  const std::string log = read_file(dir / "run.log");
  EXPECT_EQ(exit_code, 1) << log;
  EXPECT_LT(seconds, 10.0) << log;
  EXPECT_NE(log.find("rank 1 failed: process " + std::to_string(pids[1]) +
                     " was killed by signal 9"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("rank 0: error: step "), std::string::npos) << log;
  EXPECT_NE(log.find("rank 1 closed its connection"), std::string::npos) << log;
  const std::int64_t last_checkpoint = last_event_step(progress, "checkpoint", 0);
  ASSERT_LT(last_checkpoint, 14) << "the job finished before the kill; " << log;
  EXPECT_NE(log.find("flotilla-worker: FAILED: "), std::string::npos) << log;
  EXPECT_NE(log.find("last complete checkpoint at step " + std::to_string(last_checkpoint)),
            std::string::npos)
      << log;

  auto again = run_command(worker_binary() + " run" + job("elastic") + " --progress " +
                           (dir / "progress2.jsonl").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(read_file(dir / "progress2.jsonl")
                .find("\"resumed_from_step\":" + std::to_string(last_checkpoint)),
            std::string::npos);
  EXPECT_NE(again.output.find("flotilla-worker: finished: " + std::to_string(14 - last_checkpoint) +
                              " steps this run (steps " + std::to_string(last_checkpoint) +
                              "..13 of 14), last complete checkpoint at step 14, "),
            std::string::npos)
      << again.output;
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
