// The worker's step progress line: format and parse are inverses, and bad lines are one error.
#include "common/progress_line.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace flotilla {
namespace {

StepProgress sample() {
  StepProgress p;
  p.rank = 3;
  p.stage = 1;
  p.dp_index = 1;
  p.step = 12345678901;
  p.loss = 5.0968123456789012;
  p.grad_norm = 0.1;
  p.lr = 3e-4;
  p.tokens_per_s = 3263.25;
  p.step_seconds = 0.0783;
  p.pipeline_seconds = 0.07;
  p.dp_reduce_seconds = 1.0 / 3.0;
  p.first_global_micro_batch = 4;
  p.forward_seconds = {0.011, 0.012, 1e-9};
  p.backward_seconds = {0.021, 0.022, 2.0 / 7.0};
  p.time_unix_ms = 1763950000123.5;
  return p;
}

TEST(ProgressLine, RoundTripsEveryFieldExactly) {
  const StepProgress p = sample();
  const std::string line = format_step_line(p);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("\"event\":\"step\""), std::string::npos) << line;
  std::string error;
  auto back = parse_step_line(line, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, p);
  EXPECT_EQ(format_step_line(*back), line);
}

TEST(ProgressLine, NonFiniteValuesAreNullAndReadBackAsNan) {
  StepProgress p = sample();
  p.loss = std::numeric_limits<double>::quiet_NaN();
  p.tokens_per_s = std::numeric_limits<double>::infinity();
  const std::string line = format_step_line(p);
  EXPECT_NE(line.find("\"loss\":null"), std::string::npos) << line;
  auto back = parse_step_line(line, nullptr);
  ASSERT_TRUE(back);
  EXPECT_TRUE(std::isnan(back->loss));
  EXPECT_TRUE(std::isnan(back->tokens_per_s));
  EXPECT_EQ(back->forward_seconds, p.forward_seconds);
}

TEST(ProgressLine, OtherEventsAndDamagedLinesAreOneLineErrors) {
  std::string error;
  EXPECT_FALSE(parse_step_line("not json", &error));
  EXPECT_EQ(error, "progress line is not a JSON object");
  EXPECT_FALSE(parse_step_line(R"({"event":"start","rank":0})", &error));
  EXPECT_NE(error.find("not a step event"), std::string::npos);
  EXPECT_FALSE(parse_step_line(R"({"event":7})", &error));
  nlohmann::json j = nlohmann::json::parse(format_step_line(sample()));
  j.erase("stage");
  EXPECT_FALSE(parse_step_line(j.dump(), &error));
  EXPECT_EQ(error, "step progress line has no \"stage\"");
  j = nlohmann::json::parse(format_step_line(sample()));
  j["forward_seconds"] = {0.1, "slow"};
  EXPECT_FALSE(parse_step_line(j.dump(), &error));
  EXPECT_NE(error.find("forward_seconds"), std::string::npos) << error;
  j = nlohmann::json::parse(format_step_line(sample()));
  j["step"] = 1.5;
  EXPECT_FALSE(parse_step_line(j.dump(), &error));
  EXPECT_NE(error.find("not an integer"), std::string::npos) << error;
  // The writer may add fields; readers ignore them.
  j = nlohmann::json::parse(format_step_line(sample()));
  j["new_field"] = true;
  EXPECT_TRUE(parse_step_line(j.dump(), &error)) << error;
}

// The `memory` line: written once per run by a rank whose backend knows its device (an emulated
// GPU, a CUDA device); the sidecar's peakBytes and the demo's report read it back.
TEST(ProgressLine, MemoryLineRoundTripsAndRefusesDamage) {
  MemoryProgress m;
  m.rank = 3;
  m.stage = 1;
  m.gpu_type = "NVIDIA H100 80GB HBM3";
  m.peak_bytes = 61'203'415'040;  // above 2^32: must stay a 64-bit integer
  m.capacity_bytes = 85'045'379'072;
  m.time_unix_ms = 1.7e12;
  const std::string line = format_memory_line(m);
  std::string error;
  const auto back = parse_memory_line(line, &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(*back, m);
  EXPECT_FALSE(parse_step_line(line, &error));  // not a step line
  EXPECT_NE(error.find("not a step event"), std::string::npos) << error;
  nlohmann::json j = nlohmann::json::parse(line);
  j["peak_bytes"] = "61 GB";
  EXPECT_FALSE(parse_memory_line(j.dump(), &error));
  EXPECT_EQ(error, "memory progress line: \"peak_bytes\" is \"61 GB\", not an integer");
  j = nlohmann::json::parse(line);
  j.erase("gpu_type");
  EXPECT_FALSE(parse_memory_line(j.dump(), &error));
  EXPECT_EQ(error, "memory progress line: \"gpu_type\" is not a string");
}

}  // namespace
}  // namespace flotilla
