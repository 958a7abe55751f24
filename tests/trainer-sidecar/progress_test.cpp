// Folding worker progress lines into the report fields, and tailing a growing file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "trainer-sidecar/progress_summary.h"
#include "trainer-sidecar/progress_tail.h"

namespace flotilla::sidecar {
namespace {

std::string line(int rank, int stage, int dp, std::int64_t step, double loss, double tps,
                 std::vector<double> fwd, std::vector<double> bwd) {
  return format_step_line({.rank = rank,
                           .stage = stage,
                           .dp_index = dp,
                           .step = step,
                           .loss = loss,
                           .tokens_per_s = tps,
                           .forward_seconds = std::move(fwd),
                           .backward_seconds = std::move(bwd)});
}

TEST(SidecarProgress, KeepsNewestStepLastStageLossAndMeanStageSeconds) {
  ProgressSummary s(2);
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":0})"));
  EXPECT_FALSE(s.fold("not json"));
  EXPECT_FALSE(s.has_step());
  EXPECT_TRUE(s.fold(line(0, 0, 0, 4, 9.0, 100, {0.1, 0.3}, {0.2, 0.4})));
  EXPECT_EQ(s.completed_steps(), 5);
  EXPECT_DOUBLE_EQ(s.loss(), 9.0);  // no last-stage line yet: any rank's copy
  EXPECT_TRUE(s.fold(line(1, 1, 0, 4, 2.5, 120, {0.5}, {1.0})));
  EXPECT_DOUBLE_EQ(s.loss(), 2.5);
  EXPECT_DOUBLE_EQ(s.tokens_per_second(), 120);
  EXPECT_TRUE(s.fold(line(0, 0, 0, 5, 7.0, 90, {0.1}, {0.2})));  // stage 0 of the next step
  EXPECT_EQ(s.completed_steps(), 6);
  EXPECT_DOUBLE_EQ(s.loss(), 2.5);  // still the last stage's value
  auto stages = s.stage_seconds();
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].stage, 0);
  EXPECT_DOUBLE_EQ(stages[0].forward_s, 0.1);
  EXPECT_DOUBLE_EQ(stages[1].forward_s, 0.5);
  EXPECT_DOUBLE_EQ(stages[1].backward_s, 1.0);
}

// The worker's "memory" lines (emulated GPUs) become the report's peakBytes: the pod's busiest
// rank, never a malformed or non-positive value; they are not step lines.
TEST(SidecarProgress, MemoryLinesGiveThePodsLargestMeasuredPeak) {
  ProgressSummary s(2);
  EXPECT_EQ(s.peak_bytes(), 0);
  // Lines as the worker writes them (common/progress_line.h's memory schema).
  const auto line = [](int rank, const std::string& peak) {
    return R"({"event":"memory","rank":)" + std::to_string(rank) + R"(,"stage":1,"gpu_type":"emu-fast","peak_bytes":)" +
           peak + R"(,"capacity_bytes":4600000,"time_unix_ms":1.7e12})";
  };
  EXPECT_FALSE(s.fold(line(0, "2130000")));
  EXPECT_FALSE(s.fold(line(1, "3000000")));
  EXPECT_FALSE(s.fold(line(2, "-5")));
  EXPECT_FALSE(s.fold(line(3, R"("lots")")));
  EXPECT_FALSE(s.fold(R"({"event":"memory","rank":4,"stage":1,"peak_bytes":9000000})"));  // no gpu_type: refused
  EXPECT_FALSE(s.fold(R"({"event":"memory", truncated)"));
  EXPECT_EQ(s.peak_bytes(), 3000000);
  EXPECT_FALSE(s.has_step());
  s.reset(2);
  EXPECT_EQ(s.peak_bytes(), 0);
}

// A job re-created over a finished checkpoint folder: every rank resumes at step 500 of 500 and
// exits without a step line; the job is at step 500, not 0. A later step line still wins.
TEST(SidecarProgress, AStartLineResumedFromACheckpointIsTheCompletedStep) {
  ProgressSummary s(2);
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":0,"stage":0,"resumed_from_step":500,"time_unix_ms":1.7e12})"));
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":1,"stage":1,"resumed_from_step":500,"time_unix_ms":1.7e12})"));
  EXPECT_FALSE(s.has_step());
  EXPECT_EQ(s.completed_steps(), 500);
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":0,"resumed_from_step":"500"})"));  // not an integer: ignored
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":0})"));
  EXPECT_EQ(s.completed_steps(), 500);
  s.reset(2);
  EXPECT_FALSE(s.fold(R"({"event":"start","rank":1,"stage":1,"resumed_from_step":40})"));
  EXPECT_EQ(s.completed_steps(), 40);
  EXPECT_TRUE(s.fold(line(1, 1, 0, 40, 2.0, 10, {0.1}, {0.2})));
  EXPECT_EQ(s.completed_steps(), 41);
  EXPECT_DOUBLE_EQ(s.loss(), 2.0);
}

TEST(SidecarProgress, TailReturnsEachCompleteLineOnce) {
  auto path = std::filesystem::temp_directory_path() / ("sidecar-tail-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ProgressTail tail(path.string());
  EXPECT_TRUE(tail.read_new_lines().empty());  // no file yet
  std::ofstream out(path);
  out << "a\nb" << std::flush;
  EXPECT_EQ(tail.read_new_lines(), std::vector<std::string>{"a"});
  out << "c\nd\n" << std::flush;
  EXPECT_EQ(tail.read_new_lines(), (std::vector<std::string>{"bc", "d"}));
  EXPECT_TRUE(tail.read_new_lines().empty());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace flotilla::sidecar
