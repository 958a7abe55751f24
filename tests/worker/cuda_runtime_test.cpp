// The CUDA backend through the real flotilla-worker launcher on ONE GPU (the machine a GPU
// session is most likely lent): every rank of the job shares device 0 and tensors move over
// TCP, which `--comm auto` must pick by itself. What the design claims there, and is tested:
//   - run-to-run: the same CUDA job twice gives byte-identical loss logs (no atomics, fixed
//     reduction orders, one cuBLAS on one GPU model);
//   - rescaling: a unit's math does not depend on the stage it sits in or on the DP degree
//     (activations cross stages as exact float copies, the DP fold is the same left fold as
//     on the CPU), so PP 2 -> PP 1 and DP 2 -> DP 1 (V = 2) reproduce the uninterrupted CUDA
//     run bit for bit;
//   - against the CPU reference the CUDA run is NOT bit-identical (different summation
//     orders); its losses agree to 1e-3 relative over six steps.
// Without a GPU every test skips with the reason (the suite must pass on CPU-only CI).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <tuple>
#include <vector>

#include "tests/worker/runtime_test_support.h"
#include "worker/model/backend.h"
#include "process/free_port.h"

namespace flotilla::worker {
namespace {

using namespace testing;
namespace fs = std::filesystem;

std::string skip_reason() {
  if (!cuda_compiled()) return "this build has no CUDA (nvcc not found)";
  if (cuda_device_count() == 0) return "no CUDA device visible on this machine";
  return {};
}

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << "CUDA runtime test skipped: " << why;
    dir_ = fresh_dir(std::string("cuda_") +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    data_ = write_text_file(dir_);
  }
  // `flotilla-worker run` with every rank on GPU 0 (FLOTILLA_VISIBLE_GPUS=0), --comm auto.
  CommandResult run(const std::string& job, const std::string& layout, int steps,
                    const std::string& backend = "cuda") {
    const std::string cmd = "FLOTILLA_VISIBLE_GPUS=0 " + worker_binary() +
                            " run --model small --backend " + backend + " --data " +
                            data_.string() + " --checkpoint-dir " + (dir_ / ("ck_" + job)).string() +
                            " --loss-log " + (dir_ / ("loss_" + job + ".txt")).string() +
                            " --progress " + (dir_ / ("progress_" + job + ".jsonl")).string() +
                            " --checkpoint-every 3 --steps " + std::to_string(steps) + " " + layout;
    return run_command(cmd);
  }
  std::string loss(const std::string& job) { return read_file(dir_ / ("loss_" + job + ".txt")); }
  std::string progress(const std::string& job) {
    return read_file(dir_ / ("progress_" + job + ".jsonl"));
  }
  // The %.17g column of a loss log.
  std::vector<double> loss_values(const std::string& job) {
    std::istringstream in(loss(job));
    std::vector<double> out;
    std::string step, hex, dec;
    while (in >> step >> hex >> dec) out.push_back(std::strtod(dec.c_str(), nullptr));
    return out;
  }
  // The uninterrupted 6-step job under `base`, then the same job as `before` for 3 steps and
  // `after` from its step-3 checkpoint: the loss logs must be the same bytes. Every rank of
  // every run must have used TCP (one GPU).
  void expect_rescale_matches(const std::string& base, const std::string& before,
                              const std::string& after) {
    for (const auto& [job, layout, steps] : {std::tuple{"base", base, 6},
                                             std::tuple{"elastic", before, 3},
                                             std::tuple{"elastic", after, 6}}) {
      auto r = run(job, layout, steps);
      ASSERT_EQ(r.exit_code, 0) << layout << ": " << r.output;
    }
    EXPECT_EQ(count_lines(dir_ / "loss_base.txt"), 6);
    EXPECT_EQ(progress("elastic").find("\"comm\":\"nccl\""), std::string::npos);
    EXPECT_EQ(loss("elastic"), loss("base"));
  }
  fs::path dir_, data_;
};

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

TEST_F(CudaRuntime, TwoRanksOnOneGpuPickTcpAndRepeatBitForBit) {
  auto first = run("a", "--pp 2", 6);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto second = run("b", "--pp 2", 6);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  // Both ranks started with the TCP tensor path: NCCL cannot put two ranks on one device.
  EXPECT_EQ(count_of(progress("a"), "\"comm\":\"tcp\""), 2) << progress("a");
  EXPECT_EQ(count_of(progress("a"), "\"comm\":\"nccl\""), 0);
  EXPECT_EQ(count_lines(dir_ / "loss_a.txt"), 6);
  EXPECT_EQ(loss("a"), loss("b")) << "the same CUDA job twice must log the same bits";
}

TEST_F(CudaRuntime, LossesAgreeWithTheCpuReferenceButAreTheirOwnBits) {
  auto gpu = run("gpu", "--pp 2", 6);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  auto cpu = run("cpu", "--pp 2", 6, "cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  const auto g = loss_values("gpu"), c = loss_values("cpu");
  ASSERT_EQ(g.size(), 6U);
  ASSERT_EQ(c.size(), 6U);
  for (std::size_t s = 0; s < g.size(); ++s)
    EXPECT_NEAR(g[s], c[s], 1e-3 * c[s]) << "step " << s;
  EXPECT_LT(g.back(), g.front()) << "training on the GPU must lower the loss";
}

TEST_F(CudaRuntime, PipelineTwoThenOneMatchesUninterruptedBitForBit) {
  expect_rescale_matches("--pp 1", "--pp 2", "--pp 1");
}

TEST_F(CudaRuntime, DataParallelTwoThenOneOverTcpMatchesUninterruptedBitForBit) {
  const std::string v = " --virtual-shards 2";
  expect_rescale_matches("--dp 1" + v, "--dp 2" + v, "--dp 1" + v);
}

// torchrun-style start (no launcher to resolve --comm auto): two `flotilla-worker rank`
// processes that both see GPU 0 must agree on TCP (their GPU UUIDs collide) instead of
// failing in ncclCommInitRank, and log the same losses as the launcher's run.
TEST_F(CudaRuntime, RanksStartedWithoutTheLauncherAgreeOnTcpWhenSharingAGpu) {
  auto launched = run("launched", "--pp 2", 3);
  ASSERT_EQ(launched.exit_code, 0) << launched.output;
  const std::string args = " rank --model small --backend cuda --comm auto --pp 2 --data " +
                           data_.string() + " --checkpoint-dir " + (dir_ / "ck_manual").string() +
                           " --loss-log " + (dir_ / "loss_manual.txt").string() + " --progress " +
                           (dir_ / "progress_manual.jsonl").string() +
                           " --checkpoint-every 3 --steps 3";
  const std::string env = "CUDA_VISIBLE_DEVICES=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(process::pick_free_port());
  auto r = run_command("(RANK=0 LOCAL_RANK=0 " + env + " " + worker_binary() + args + ") & p0=$!; " +
                       "(RANK=1 LOCAL_RANK=1 " + env + " " + worker_binary() + args + ") & p1=$!; " +
                       "wait $p0; r0=$?; wait $p1; r1=$?; exit $((r0 | r1))");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_of(progress("manual"), "\"comm\":\"tcp\""), 2) << progress("manual");
  EXPECT_EQ(loss("manual"), loss("launched"));
}

}  // namespace
}  // namespace flotilla::worker
