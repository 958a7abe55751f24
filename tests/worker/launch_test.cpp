// The launch sequence (worker/launch/) linked on its own: this test links flotilla::worker_launch
// only — no trainer, model, cuBLAS or CUDA — which is what the trainer sidecar will link.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "process/fork_call.h"
#include "process/stop_flag.h"
#include "tests/process/lock_holder.h"
#include "worker/launch/checkpoint_folder.h"
#include "worker/launch/resume_check.h"
#include "worker/launch/start_job.h"

namespace flotilla::worker {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("flotilla-launch-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ResumeIdentity identity() {
  ResumeIdentity id;
  id.model = {{"num_layers", 2}, {"hidden", 64}, {"heads", 2}, {"seq_len", 32}, {"vocab", 256}};
  id.training = {{"global_batch", 4}, {"micro_batch", 1}, {"seed", 7}, {"lr", 0.001}};
  id.num_units = 4;
  return id;
}

// A complete checkpoint folder with meta.json as the trainer writes it (no unit files: the
// launch check reads meta.json only).
void write_checkpoint(const fs::path& root, std::int64_t step, const ResumeIdentity& id) {
  const auto folder = step_folder(root, step);
  fs::create_directories(folder);
  json units = json::array();
  for (int u = 0; u < id.num_units; ++u)
    units.push_back({{"unit", u}, {"file", "unit_000" + std::to_string(u) + ".bin"}, {"bytes", 100u},
                     {"crc32", 1u}, {"param_count", 10u}});
  json meta = {{"format", "flotilla-worker-checkpoint/1"}, {"step", step}, {"model", id.model},
               {"training", id.training}, {"units", units}};
  std::ofstream(folder / "meta.json") << meta.dump(1);
  std::ofstream(folder / "DONE") << "complete\n";
}

TEST(LaunchResumeCheck, MatchesMismatchesAndDamage) {
  auto dir = fresh_dir("resume");
  EXPECT_EQ(check_resume_compatibility(dir / "ck", identity()), "") << "no checkpoint: nothing to check";
  write_checkpoint(dir / "ck", 4, identity());
  fs::create_directories(step_folder(dir / "ck", 6));  // newer but incomplete: ignored
  ASSERT_TRUE(find_latest_complete(dir / "ck"));
  EXPECT_EQ(find_latest_complete(dir / "ck")->step, 4);
  EXPECT_EQ(check_resume_compatibility(dir / "ck", identity()), "");
  ResumeIdentity other = identity();
  other.model["hidden"] = 128;
  std::string e = check_resume_compatibility(dir / "ck", other);
  EXPECT_NE(e.find("model.hidden is 64 in the checkpoint but 128 in this job"), std::string::npos) << e;
  other = identity();
  other.num_units = 6;
  e = check_resume_compatibility(dir / "ck", other);
  EXPECT_NE(e.find("lists 4 unit files, the model has 6"), std::string::npos) << e;
  std::ofstream(step_folder(dir / "ck", 4) / "meta.json") << "{not json";
  e = check_resume_compatibility(dir / "ck", identity());
  EXPECT_NE(e.find("has a corrupt meta.json"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(LaunchStartJob, SpawnsUnderTheLockAndRefusesASecondLauncher) {
  auto dir = fresh_dir("lock");
  JobStart request;
  request.checkpoint_dir = dir / "ck";
  request.identity = identity();
  request.spawn = [](process::ProcessGroup& group) {
    group.spawn("/bin/sh", {"-c", "sleep 0.3"}, {});
    group.spawn("/bin/sh", {"-c", "exit 0"}, {});
  };
  StartedJob first = start_job(request);
  ASSERT_TRUE(first.ok()) << first.error;
  ASSERT_TRUE(first.lock);
  ASSERT_EQ(first.group->pids().size(), 2u);
  bool spawned_again = false;
  request.spawn = [&](process::ProcessGroup&) { spawned_again = true; };
  StartedJob second = start_job(request);
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_NE(second.error.find("another flotilla-worker launcher (pid " + std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.error;
  EXPECT_FALSE(spawned_again);
  EXPECT_TRUE(first.group->wait_all().ok);
  first = StartedJob{};  // releases the lock
  EXPECT_TRUE(start_job(request).ok());
  EXPECT_TRUE(spawned_again);
  fs::remove_all(dir);
}

TEST(LaunchStartJob, IncompatibleCheckpointStopsBeforeTheLockAndTheSpawn) {
  auto dir = fresh_dir("incompatible");
  write_checkpoint(dir / "ck", 2, identity());
  ResumeIdentity other = identity();
  other.training["seed"] = 8;
  bool spawned = false;
  JobStart request;
  request.checkpoint_dir = dir / "ck";
  request.identity = other;
  request.spawn = [&](process::ProcessGroup&) { spawned = true; };
  StartedJob job = start_job(request);
  EXPECT_EQ(job.exit_code, 2);
  EXPECT_NE(job.error.find("training.seed is 7 in the checkpoint but 8 in this job"), std::string::npos) << job.error;
  EXPECT_FALSE(spawned);
  EXPECT_FALSE(job.lock);
  request.identity.reset();  // no early check: the ranks would check
  EXPECT_TRUE(start_job(request).ok());
  EXPECT_TRUE(spawned);
  fs::remove_all(dir);
}

TEST(LaunchStartJob, SpawnFailureIsExitOneAndReleasesTheLock) {
  auto dir = fresh_dir("spawnfail");
  JobStart request;
  request.checkpoint_dir = dir / "ck";
  request.spawn = [](process::ProcessGroup&) { throw std::runtime_error("cannot pick a free TCP port"); };
  StartedJob job = start_job(request);
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_EQ(job.error, "cannot pick a free TCP port");
  pid_t holder = 0;
  EXPECT_TRUE(process::JobLock::try_acquire(dir / "ck", &holder));
  fs::remove_all(dir);
}

// relaunch: the launcher holding the folder is SIGTERMed, finishes ("checkpoints") and exits;
// then the new job starts under the lock.
TEST(LaunchStartJob, RelaunchStopsTheRunningLauncherFirst) {
  auto dir = fresh_dir("relaunch");
  bool holds_lock = false;
  process::Child old = testing::fork_lock_holder(dir / "ck", holds_lock);
  ASSERT_TRUE(holds_lock);
  JobStart request;
  request.checkpoint_dir = dir / "ck";
  request.stop_running_job = true;
  request.stop_timeout = 10s;
  pid_t reported = 0;
  request.on_stopped = [&](pid_t pid) { reported = pid; };
  request.spawn = [&](process::ProcessGroup& group) {
    EXPECT_EQ(reported, old.pid()) << "on_stopped comes before the spawn";
    group.spawn("/bin/sh", {"-c", "exit 0"}, {});
  };
  StartedJob job = start_job(request);
  ASSERT_TRUE(job.ok()) << job.error;
  EXPECT_EQ(job.stopped_pid, old.pid());
  EXPECT_FALSE(job.stop_timed_out);
  auto status = old.wait_for(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->ok());
  EXPECT_TRUE(job.group->wait_all().ok);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flotilla::worker
