// The failure line of a torchrun agent's log. The summary blocks follow torchrun's own templates
// (PyTorch torch/distributed/elastic/multiprocessing/errors/__init__.py: _MSG_FORMAT_TEMPLATE and
// _FAILURE_FORMAT_TEMPLATE, and ProcessFailure's messages "To enable traceback see: ..." and
// "Signal N (NAME) received by PID P"); argparse's error line is "%(prog)s: error: %(message)s".
// The last line that mentions "error" (what the reference worker's logs are read for) would be
// torchrun's useless "traceback : To enable traceback see: .../errors.html" in each of them.
#include <gtest/gtest.h>

#include <string>

#include "trainer-sidecar/torchrun_failure.h"

namespace flotilla::sidecar {
namespace {

// torchrun's summary with rank 1 as the root cause, exiting with `exitcode`, and `traceback`.
std::string summary(const std::string& exitcode, const std::string& traceback) {
  return "Traceback (most recent call last):\n"
         "  File \"/usr/local/bin/torchrun\", line 8, in <module>\n"
         "    sys.exit(main())\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "/opt/megatron-lm/pretrain_gpt.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "  <NO_OTHER_FAILURES>\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "[0]:\n"
         "  time      : 2026-11-24_10:00:00\n"
         "  host      : demo-n0-g2\n"
         "  rank      : 1 (local_rank: 1)\n"
         "  exitcode  : " + exitcode + " (pid: 457)\n"
         "  error_file: <N/A>\n"
         "  traceback : " + traceback + "\n"
         "============================================================\n";
}

const std::string kNoTraceback = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";

TEST(TorchrunFailure, ARanksExceptionIsTheLine) {
  const std::string log =
      "[rank1]: Traceback (most recent call last):\n"
      "[rank1]:   File \"/opt/megatron-lm/pretrain_gpt.py\", line 300, in <module>\n"
      "[rank1]:     pretrain(\n"
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
      "E1124 10:00:00.000000 123 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
      "local_rank: 1 (pid: 457) of binary: /usr/bin/python3\n" +
      summary("1", kNoTraceback);
  EXPECT_EQ(torchrun_failure_line(log), "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
}

TEST(TorchrunFailure, AnArgparseErrorIsTheLine) {
  const std::string log =
      "usage: pretrain_gpt.py [-h] [--num-layers NUM_LAYERS]\n"
      "pretrain_gpt.py: error: unrecognized arguments: --bogus 1\n" +
      summary("2", kNoTraceback);
  EXPECT_EQ(torchrun_failure_line(log), "pretrain_gpt.py: error: unrecognized arguments: --bogus 1");
}

TEST(TorchrunFailure, WithoutAnExceptionTheRootCauseSummaryIsTheLine) {
  EXPECT_EQ(torchrun_failure_line(summary("-9", "Signal 9 (SIGKILL) received by PID 457")),
            "rank 1 (local_rank: 1) exitcode -9 (pid: 457): Signal 9 (SIGKILL) received by PID 457");
  EXPECT_EQ(torchrun_failure_line(summary("1", kNoTraceback)), "rank 1 (local_rank: 1) exitcode 1 (pid: 457)");
}

TEST(TorchrunFailure, NothingToSayIsEmptyAndLongLinesAreClipped) {
  EXPECT_EQ(torchrun_failure_line(""), "");
  EXPECT_EQ(torchrun_failure_line("W1124 starting 2 processes\nsome output: fine\n"), "");
  EXPECT_EQ(torchrun_failure_line("ValueError: " + std::string(1000, 'x') + "\n").size(), 400u);
}

}  // namespace
}  // namespace flotilla::sidecar
