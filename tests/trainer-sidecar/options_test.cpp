// The sidecar's flags: environment defaults, explicit flags winning, one-line refusals.
#include <gtest/gtest.h>

#include <cstdlib>

#include "trainer-sidecar/options.h"

namespace flotilla::sidecar {
namespace {

TEST(SidecarOptions, DefaultsComeFromThePodEnvironment) {
  ::setenv("POD_NAME", "job-0", 1);
  ::setenv("POD_NAMESPACE", "team", 1);
  ::setenv("FLOTILLA_POD_DIR", "/pods/job-0", 1);
  auto parsed = parse_options({});
  ASSERT_TRUE(std::holds_alternative<Options>(parsed)) << std::get<std::string>(parsed);
  const auto& o = std::get<Options>(parsed);
  EXPECT_EQ(o.pod_name, "job-0");
  EXPECT_EQ(o.pod_namespace, "team");
  EXPECT_EQ(o.work_dir, "/pods/job-0");
  EXPECT_EQ(o.worker_binary, "flotilla-worker");
  EXPECT_EQ(o.report_interval_ms, 2000);
  EXPECT_EQ(o.rendezvous_timeout_s, 60);
  EXPECT_EQ(o.max_restarts, 3);
  ::unsetenv("POD_NAME");
  ::unsetenv("POD_NAMESPACE");
  ::unsetenv("FLOTILLA_POD_DIR");
}

TEST(SidecarOptions, FlagsWinAndBadValuesAreOneLine) {
  auto parsed = parse_options({"--pod-name", "p", "--namespace=ns", "--worker-binary", "/w",
                               "--work-dir", "/tmp/x", "--report-interval-ms", "100",
                               "--rendezvous-timeout-s", "2.5", "--max-restarts", "0"});
  ASSERT_TRUE(std::holds_alternative<Options>(parsed)) << std::get<std::string>(parsed);
  const auto& o = std::get<Options>(parsed);
  EXPECT_EQ(o.pod_namespace, "ns");
  EXPECT_EQ(o.rendezvous_timeout_s, 2.5);
  EXPECT_EQ(o.max_restarts, 0);
  auto bad = parse_options({"--pod-name", "p", "--max-restarts", "x"});
  EXPECT_EQ(std::get<std::string>(bad), "--max-restarts 'x' is not a valid number");
  EXPECT_NE(std::get<std::string>(parse_options({"--pod-name", "p", "--bogus", "1"})).find("unknown flag --bogus"),
            std::string::npos);
  ::unsetenv("POD_NAME");
  EXPECT_EQ(std::get<std::string>(parse_options({})), "no pod name: pass --pod-name or set $POD_NAME");
  EXPECT_TRUE(std::get<Options>(parse_options({"--version"})).version);
}

}  // namespace
}  // namespace flotilla::sidecar
