// `flotilla demo --headless --quick`, the shortened CI scenario, run as a real process: the real
// devcluster with emulated fast, slow and small GPUs, the real operator, sidecars and workers.
// The demo's own checks are independent of what it printed before: job phases from the API
// server, the elastic job's loss log against an uninterrupted one-process `flotilla-worker run`
// (bit for bit), steps lost from the workers' progress files. This test asserts that they all
// passed, that the benefit check refused the brief node with its inputs printed, and that the
// predicted and measured numbers were printed, and it bounds the scenario's time.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/devcluster/devcluster_process.h"

namespace {

namespace fs = std::filesystem;

TEST(Demo, ShortenedScenarioPassesEveryCheck) {
  const fs::path dir = fs::temp_directory_path() / ("flotilla-demo-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto start = std::chrono::steady_clock::now();
  const auto r = devcluster_test::run_command(std::string(FLOTILLA_BINARY_DIR) + "/cli/flotilla demo --headless --quick --dir " +
                                              dir.string() + " 2>&1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string& out = r.output;
  EXPECT_NE(out.find("demo: PASS"), std::string::npos) << out;
  EXPECT_NE(out.find("equals an uninterrupted one-process run bit for bit"), std::string::npos) << out;
  EXPECT_NE(out.find("lost 2 GPUs: shrink 4 -> 2"), std::string::npos) << "the PP-first shrink on node loss\n" << out;
  EXPECT_NE(out.find("gives 2 GPUs back for default/urgent"), std::string::npos) << "the preemption\n" << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("the benefit check refused: λ = [0-9.]+/s, S = [0-9.]+, T_overhead = "
                                                "[0-9.]+ s, needs [0-9.]+ s idle, P = [0-9.e-]+ <")))
      << out;
  EXPECT_NE(out.find("would have restarted twice"), std::string::npos) << out;
  // Predicted vs measured tokens/s: one row per plan with a ratio; emulated peak memory per stage.
  EXPECT_TRUE(std::regex_search(out, std::regex("PP[0-9]·DP[0-9]·TP1 +[0-9]+ +scale-up +[0-9]+ +[0-9]+ +[01]\\.[0-9]+")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("predicted [0-9.]+ MB +emulated [0-9.]+ MB +ratio")) ) << out;
  EXPECT_LT(seconds, 180) << "the CI scenario must stay under 3 minutes";
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
