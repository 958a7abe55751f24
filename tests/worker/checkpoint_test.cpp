// Checkpoint and launcher errors through the real binary: corrupt and mismatched checkpoints,
// incomplete checkpoints, keep-last-K, impossible layouts, missing data, a second launcher.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/worker/runtime_test_support.h"
#include "worker/model/backend.h"
#include "worker/runtime/checkpoint.h"
#include "process/job_lock.h"

namespace flotilla::worker {
namespace {

using namespace testing;
namespace fs = std::filesystem;

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(std::string("ckpt_") +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    data_ = write_text_file(dir_);
  }
  CommandResult run(const std::string& flags, const std::string& ck = "ck") {
    return run_command(worker_binary() + " run --model tiny --data " + data_.string() +
                       " --checkpoint-dir " + (dir_ / ck).string() + " --loss-log " +
                       (dir_ / ("loss_" + ck + ".txt")).string() + " " + flags);
  }
  struct ErrorCase {
    std::string flags, message;
  };
  // Each case is refused before starting: exit 2 and one line containing its message.
  void expect_one_line_errors(const std::vector<ErrorCase>& cases) {
    for (const auto& c : cases) {
      auto r = run("--steps 1 " + c.flags);
      EXPECT_EQ(r.exit_code, 2) << c.flags;
      EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags << " -> " << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    }
  }
  fs::path dir_, data_;
};

TEST_F(CheckpointErrors, CorruptUnitFileNamesTheFileAndTheFix) {
  ASSERT_EQ(run("--steps 2").exit_code, 0);
  {
    std::fstream f(dir_ / "ck" / "step_00000002" / "unit_0002.bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x42');
  }
  auto r = run("--steps 4 --pp 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("unit_0002.bin' is corrupt: CRC32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("to fall back to the previous checkpoint"), std::string::npos);
}

TEST_F(CheckpointErrors, MismatchedModelOrBatchIsRefusedBeforeStarting) {
  ASSERT_EQ(run("--steps 2").exit_code, 0);
  auto r = run("--steps 4 --hidden 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("does not match this job: model.hidden is 32 in the checkpoint but 64"),
            std::string::npos)
      << r.output;
  auto v = run("--steps 4 --virtual-shards 2");
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_NE(v.output.find("training.virtual_shards is 1 in the checkpoint but 2"),
            std::string::npos)
      << v.output;
}

TEST_F(CheckpointErrors, IncompleteNewestCheckpointIsIgnored) {
  ASSERT_EQ(run("--steps 4", "base").exit_code, 0);
  ASSERT_EQ(run("--steps 2").exit_code, 0);
  // A killed writer's leftovers: a newer folder with a garbage unit file and no DONE.
  fs::create_directories(dir_ / "ck" / "step_00000003");
  std::ofstream(dir_ / "ck" / "step_00000003" / "unit_0000.bin") << "garbage";
  auto r = run("--steps 4 --pp 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(dir_ / "loss_ck.txt"), read_file(dir_ / "loss_base.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "ck" / "step_00000003"));  // pruned as stale
}

TEST_F(CheckpointErrors, KeepsTheLastKCompleteCheckpoints) {
  ASSERT_EQ(run("--steps 5 --checkpoint-every 1 --keep 2").exit_code, 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_ / "ck"))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step_00000004", "step_00000005"}));
  auto meta = read_file(dir_ / "ck" / "step_00000005" / "meta.json");
  for (const char* key : {"\"step\": 5", "\"data_position\"", "\"rng\"", "\"model\"", "\"layout\"",
                          "\"crc32\"", "\"partition\""})
    EXPECT_NE(meta.find(key), std::string::npos) << key << " missing in\n" << meta;
}

TEST_F(CheckpointErrors, ImpossibleLayoutsAndMissingDataAreOneLineErrors) {
  const std::vector<ErrorCase> cases = {
      {"--pp 5", "--pp 5 exceeds the model's 4 units"},
      {"--dp 3 --global-batch 8", "not divisible by 3 virtual shards"},
      {"--dp 2 --virtual-shards 3 --global-batch 6", "--dp 2 does not divide --virtual-shards 3"},
      {"--micro-batch 3", "not divisible by micro-batch 3"},
      {"--pp 2 --partition 0:1,2:4", "contiguous"},
      {"--pp 2 --world-size 3", "--world-size 3 is not --pp x --dp = 2 x 1"},
      {"--model enormous", "unknown --model 'enormous'"},
      // Used to fork all 5000 ranks on a 2-core machine before anything could fail.
      {"--world-size 5000 --dp 5000 --global-batch 5000",
       "the local launcher starts every rank on this machine and allows at most 256"},
  };
  expect_one_line_errors(cases);
  auto missing = run_command(worker_binary() + " run --data " + (dir_ / "none.txt").string() +
                             " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("none.txt' cannot be opened"), std::string::npos)
      << missing.output;
}

// Flags that have a derived default (--dp, --world-size, --virtual-shards, the model sizes)
// used to fall back to it silently when given a negative value; NaN and inf parsed as numbers.
TEST_F(CheckpointErrors, NegativeCountsAndNonFiniteNumbersAreOneLineErrors) {
  const std::vector<ErrorCase> cases = {
      {"--dp -2", "--dp must be at least 1"},
      {"--world-size -3", "--world-size must be at least 1"},
      {"--virtual-shards -1", "--virtual-shards must be at least 1"},
      {"--layers -1", "num_layers must be >= 1 (got -1)"},
      {"--seq-len 0", "seq_len must be >= 1 (got 0)"},
      // 4 x 65536^2 elements in the MLP matrix: int shapes would overflow (was std::bad_alloc
      // or worse inside the rank).
      {"--hidden 65536 --heads 1", "more than a tensor can index (2^31 - 1)"},
      {"--lr nan", "--lr 'nan' is not a valid number"},
      {"--grad-clip inf", "--grad-clip 'inf' is not a valid number"},
      {"--lr -1", "--lr must be a positive number"},
      {"--warmup-steps -5", "--warmup-steps and --decay-steps must be >= 0"},
  };
  expect_one_line_errors(cases);
  EXPECT_FALSE(fs::exists(dir_ / "ck" / "step_00000001"));  // nothing ran
}

TEST_F(CheckpointErrors, HelpAfterTheCommandPrintsUsage) {
  auto r = run_command(worker_binary() + " run --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("usage: flotilla-worker run|relaunch|rank", 0), 0u) << r.output;
}

TEST_F(CheckpointErrors, DataThatIsAFolderOrTooShortSaysWhatToPass) {
  auto folder = run_command(worker_binary() + " run --data " + dir_.string() +
                            " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_EQ(folder.exit_code, 2);
  EXPECT_NE(folder.output.find("is not a regular file (a directory); pass a text file with --data"),
            std::string::npos)
      << folder.output;
  std::ofstream(dir_ / "empty.txt").flush();
  auto empty = run_command(worker_binary() + " run --data " + (dir_ / "empty.txt").string() +
                           " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.output.find("has 0 bytes; it needs at least seq_len + 2 = 66; pass a longer file"),
            std::string::npos)
      << empty.output;
}

// A file where the checkpoint folder should be: `run` printed a raw filesystem_error and
// `relaunch` died of an uncaught exception (abort, exit 134).
TEST_F(CheckpointErrors, CheckpointDirThatIsAFileIsRefusedByRunAndRelaunch) {
  std::ofstream(dir_ / "ck") << "not a folder";
  for (const char* mode : {"run", "relaunch"}) {
    auto r = run_command(worker_binary() + " " + mode + " --model tiny --steps 1 --data " +
                         data_.string() + " --checkpoint-dir " + (dir_ / "ck").string());
    EXPECT_EQ(r.exit_code, 2) << mode << ": " << r.output;
    EXPECT_NE(r.output.find("--checkpoint-dir '" + (dir_ / "ck").string() +
                            "' cannot be used as a folder"),
              std::string::npos)
        << mode << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// A log file in a folder that does not exist used to fail inside rank 0 after the launch
// (three lines, exit 1); it is refused before starting.
TEST_F(CheckpointErrors, UnwritableLogFilesAreRefusedBeforeStarting) {
  const auto nowhere = (dir_ / "no_such_folder" / "x.txt").string();
  expect_one_line_errors({
      {"--progress " + nowhere, "--progress '" + nowhere + "' cannot be opened for writing"},
  });
  auto r = run_command(worker_binary() + " run --model tiny --steps 1 --data " + data_.string() +
                       " --checkpoint-dir " + (dir_ / "ck").string() + " --loss-log " + nowhere);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--loss-log '" + nowhere + "' cannot be opened for writing"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "ck" / "step_00000001"));
}

TEST_F(CheckpointErrors, RelaunchWithNothingRunningStartsTheJob) {
  auto r = run_command(worker_binary() + " relaunch --model tiny --steps 1 --data " +
                       data_.string() + " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("stopped launcher"), std::string::npos) << r.output;
  EXPECT_TRUE(is_complete(dir_ / "ck" / "step_00000001"));
}

// A damaged meta.json (wrong step, units not a list, a unit entry of the wrong type) is refused
// before any rank starts, naming the file and the fix, instead of a JSON exception in a rank.
TEST_F(CheckpointErrors, MalformedMetaJsonIsRefusedBeforeStarting) {
  ASSERT_EQ(run("--steps 2").exit_code, 0);
  const auto meta_path = dir_ / "ck" / "step_00000002" / "meta.json";
  const std::string good = read_file(meta_path);
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(meta_path, std::ios::trunc) << text;
  };
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"\"step\": 2", "\"step\": -5", "\"step\" is -5, the folder is step 2"},
      {"\"units\": [", "\"units\": {\"x\": 1}, \"was\": [", "\"units\" is not a list of unit files"},
      {"\"crc32\": ", "\"crc32\": \"x\", \"was\": ", "units[0] is not {unit: 0, file, bytes"},
  };
  for (const auto& c : cases) {
    edit(c.from, c.to);
    auto r = run("--steps 3");
    EXPECT_EQ(r.exit_code, 2) << c.to << ": " << r.output;
    EXPECT_NE(r.output.find("has a corrupt meta.json: " + c.message), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("delete that folder to fall back to the previous one"),
              std::string::npos);
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "ck" / "step_00000003"));
}

TEST_F(CheckpointErrors, CudaBackendWithoutAGpuIsRefusedBeforeStarting) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible; nothing to refuse";
  auto r = run("--steps 1 --pp 2 --backend cuda");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("use --backend cpu"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST_F(CheckpointErrors, RankWithoutRendezvousEnvironmentSaysWhatIsMissing) {
  auto r = run_command("env -u RANK " + worker_binary() + " rank --data " + data_.string() +
                       " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("environment variable RANK is not set"), std::string::npos) << r.output;
  auto w = run_command("RANK=2 WORLD_SIZE=2 MASTER_PORT=1 " + worker_binary() + " rank --data " +
                       data_.string() + " --checkpoint-dir " + (dir_ / "ck").string());
  EXPECT_NE(w.output.find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos) << w.output;
}

TEST_F(CheckpointErrors, SecondLauncherOnTheSameJobIsRefused) {
  pid_t holder = 0;
  auto lock = process::JobLock::try_acquire(dir_ / "ck", &holder);
  ASSERT_TRUE(lock.has_value());
  auto r = run("--steps 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("another flotilla-worker launcher (pid " + std::to_string(::getpid())),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace flotilla::worker
