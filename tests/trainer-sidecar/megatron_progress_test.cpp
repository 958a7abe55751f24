// Megatron-LM's training log line and checkpoint tracker, as the sidecar reads them. The golden
// lines are Megatron's own format strings applied by hand to chosen values:
//   training_log() in megatron/training/training.py of the snapshot ($FLOTILLA_MEGATRON_DIR,
//   SNAPSHOT.md: commit d98e8a64dd), lines 3567-3598 and 3622-3640:
//     f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]"
//     ' iteration {:8d}/{:8d} |'            ' consumed samples: {:12d} |'
//     ' skipped samples: {:12d} |'          (only when some were skipped)
//     ' elapsed time per iteration (ms): {:.1f} |'
//     f' throughput per GPU (TFLOP/s/GPU): {throughput:.1f} |'   (with --log-throughput)
//     f' learning rate: {learning_rate:.6E} |'   f' global batch size: {batch_size:5d} |'
//     ' {}: {:.6E} |'.format(key, avg)      (each loss key, "lm loss" for GPT; left out when < 0)
//     f' loss scale: {loss_scale:.1f} |'    f' grad norm: {grad_norm:.3f} |'
//     ' number of skipped iterations: {:3d} |'   ' number of nan iterations: {:3d} |'
//   and read_metadata() in megatron/training/checkpointing.py:388-406 for the tracker file
//   (an integer iteration, or "release").
#include <gtest/gtest.h>

#include "trainer-sidecar/megatron_progress.h"

namespace flotilla::sidecar {
namespace {

// iteration 12 of 100, 384 samples, 1523.4 ms, 187.25 TFLOP/s, lr 3e-4, batch 32, loss 7.123456.
const char* kFullLine =
    " [2026-11-24 10:15:02.123456] iteration       12/     100 | consumed samples:          384 |"
    " elapsed time per iteration (ms): 1523.4 | throughput per GPU (TFLOP/s/GPU): 187.2 |"
    " learning rate: 3.000000E-04 | global batch size:    32 | lm loss: 7.123456E+00 | loss scale: 1.0 |"
    " grad norm: 2.500 | number of skipped iterations:   0 | number of nan iterations:   0 |";

// An fp16 iteration whose loss Megatron skipped (no "lm loss" field), 4 skipped samples, no
// throughput, no learning rate (Megatron leaves it out on middle pipeline stages).
const char* kSkippedLine =
    " [2026-11-24 10:15:04.000001] iteration       13/     100 | consumed samples:          416 |"
    " skipped samples:            4 | elapsed time per iteration (ms): 980.0 | global batch size:    32 |"
    " loss scale: 65536.0 | number of skipped iterations:   1 | number of nan iterations:   0 |";

// The fields every training_log line has.
void expect_counts(const MegatronLogLine& l, std::int64_t iteration, std::int64_t consumed, double ms, int batch) {
  EXPECT_EQ(l.iteration, iteration);
  EXPECT_EQ(l.train_iters, 100);
  EXPECT_EQ(l.consumed_samples, consumed);
  EXPECT_DOUBLE_EQ(l.iteration_ms, ms);
  EXPECT_EQ(l.global_batch_size, batch);
}

TEST(MegatronLogLine, ReadsTheFieldsOfTheSnapshotsFormat) {
  const auto l = parse_megatron_log_line(kFullLine);
  ASSERT_TRUE(l);
  expect_counts(*l, 12, 384, 1523.4, 32);
  ASSERT_TRUE(l->lm_loss);
  EXPECT_DOUBLE_EQ(*l->lm_loss, 7.123456);
  // 32 sequences x 1024 tokens / 1.5234 s = 21509.78 tokens/s.
  EXPECT_NEAR(megatron_tokens_per_second(*l, 1024), 21509.78, 0.01);
  EXPECT_EQ(megatron_tokens_per_second(*l, 0), 0);
}

TEST(MegatronLogLine, AnIterationWithoutALossStillGivesStepAndSpeed) {
  const auto l = parse_megatron_log_line(kSkippedLine);
  ASSERT_TRUE(l);
  expect_counts(*l, 13, 416, 980.0, 32);
  EXPECT_FALSE(l->lm_loss);
}

TEST(MegatronLogLine, APrefixedLineIsReadAndOtherLinesAreNot) {
  // torchrun --tee / a log collector may put a rank prefix in front.
  const auto prefixed = parse_megatron_log_line(std::string("[default7]:") + kFullLine);
  ASSERT_TRUE(prefixed);
  EXPECT_EQ(prefixed->iteration, 12);
  for (const char* other : {
           "",
           "training ...",
           // evaluate_and_print_results(), training.py:5372-5376 with the prefix of line 2078:
           " validation loss at iteration 10 on validation set | lm loss value: 6.900000E+00 |"
           " lm loss PPL: 9.921290E+02 | ",
           // a truncated line: no elapsed time or batch size yet
           " [2026-11-24 10:15:02.123456] iteration       12/     100 | consumed samples:          384 |",
           " [2026-11-24 10:15:02.123456] iteration       xx/     100 | consumed samples: 1 |"
           " elapsed time per iteration (ms): 1.0 | global batch size:    32 |",
       })
    EXPECT_FALSE(parse_megatron_log_line(other)) << other;
}

TEST(MegatronTracker, ReadsTheIterationAndNotARelease) {
  EXPECT_EQ(parse_megatron_tracker("250"), 250);
  EXPECT_EQ(parse_megatron_tracker("250\n"), 250);
  EXPECT_FALSE(parse_megatron_tracker("release"));
  EXPECT_FALSE(parse_megatron_tracker(""));
  EXPECT_FALSE(parse_megatron_tracker("-1"));
  EXPECT_FALSE(parse_megatron_tracker("12abc"));
}

}  // namespace
}  // namespace flotilla::sidecar
