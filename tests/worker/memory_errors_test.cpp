// A model that passes the shape checks but does not fit in a rank's memory must end with one
// line naming what was being allocated, how many bytes, and what to do, and exit code 2 (like
// any other layout the machine cannot run), never a bare std::bad_alloc. The launcher runs
// under a lowered address-space limit (ulimit -v, inherited by its ranks), so the test does not
// depend on how much memory the machine has.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/worker/runtime_test_support.h"

namespace flotilla::worker {
namespace {

using namespace testing;

// This process's address-space size in KiB. The worker maps the same libraries (it links the
// same flotilla::worker), so its start-up size is of the same order.
long own_vm_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> value;
      return value;
    }
    std::getline(status, key);
  }
  return 0;
}

CommandResult run_limited(const std::string& name, const std::string& model_flags) {
  auto dir = fresh_dir(name);
  auto data = write_text_file(dir);
  // 3 GiB above our own size: start-up fits easily, the model below does not.
  const long limit_kib = own_vm_kib() + 3L * 1024 * 1024;
  return run_command("ulimit -v " + std::to_string(limit_kib) + " && " + worker_binary() +
                     " run --model small " + model_flags + " --steps 1 --data " + data.string() +
                     " --checkpoint-dir " + (dir / "ck").string() + " --loss-log " +
                     (dir / "loss.txt").string());
}

void expect_one_clear_line(const CommandResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
  const auto at = r.output.find("out of host memory");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_NE(line.find(what), std::string::npos) << line;
  EXPECT_NE(line.find(" bytes)"), std::string::npos) << "names the byte count: " << line;
  EXPECT_NE(line.find("--pp"), std::string::npos) << "says what to do: " << line;
}

TEST(WorkerMemory, ParametersThatDoNotFitNameTheUnitAndBytes) {
  // One block of hidden 8192 holds 805 M parameters: 12.9 GB with grads and AdamW state
  // (its largest matrix, 8192 x 32768, is within the int-indexing check).
  auto r = run_limited("oom_params", "--hidden 8192 --heads 64 --layers 2 --seq-len 16");
  expect_one_clear_line(r, "unit 'block0' (805");
}

TEST(WorkerMemory, ActivationsThatDoNotFitNameTheMicroBatch) {
  // Tiny weights, but one micro-batch's attention matrix is 64 heads x 4096^2 floats = 4.3 GB.
  auto r = run_limited("oom_acts", "--hidden 64 --heads 64 --layers 1 --seq-len 4096");
  expect_one_clear_line(r, "forward pass of a micro-batch of 1 x 4096 tokens");
}

}  // namespace
}  // namespace flotilla::worker
