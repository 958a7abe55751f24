// The loop survives its own infrastructure: two operators with leader election hand over when
// the leader is SIGKILLed, and a devcluster (the API server and every pod process) restarted
// under a running job loses no job. Each job still ends with a loss log equal, bit for bit, to
// an uninterrupted run of the same model, data and seed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/leader_election.h"
#include "process/free_port.h"
#include "process/spawn.h"
#include "tests/operator/local_cluster_fixture.h"

using namespace operator_e2e;

namespace {

// A spawned process stopped with SIGTERM (then SIGKILL) when the test ends, passed or not, so
// an API server's pods are terminated by it rather than orphaned.
struct Stopped {
  Stopped(flotilla::process::Child c, std::chrono::milliseconds g) : child(std::move(c)), grace(g) {}
  Stopped(Stopped&&) = default;
  flotilla::process::Child child;
  std::chrono::milliseconds grace;
  ~Stopped() {
    if (child.pid() > 0) child.terminate(grace);
  }
};

flotilla::process::Child start(std::vector<std::string> argv, const fs::path& log) {
  flotilla::process::SpawnOptions o;
  o.argv = std::move(argv);
  o.isolation = flotilla::process::Isolation::kSession;
  o.stdout_path = o.stderr_path = log;
  return flotilla::process::spawn(o);
}

// argv with the value after `flag` replaced.
std::vector<std::string> with_flag(std::vector<std::string> argv, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag) {
      argv[i + 1] = value;
      return argv;
    }
  argv.insert(argv.end(), {flag, value});
  return argv;
}

}  // namespace

// Two operators with --leader-elect: one leads, the other waits. SIGKILL the leader (no release
// of the Lease): the standby takes over only once the Lease has expired, within client-go's
// bound (lease duration plus two jittered retry periods), and the job finishes.
TEST_F(LocalCluster, LeaderFailoverHandsOverWithinTheLeaseBounds) {
  const pid_t up_operator = up_state().value("operatorPid", 0);
  ASSERT_GT(up_operator, 0);
  const std::vector<std::string> argv = command_line_of(up_operator);
  ASSERT_FALSE(argv.empty());
  ASSERT_EQ(::kill(up_operator, SIGTERM), 0);
  ASSERT_TRUE(wait_for([&] { return ::kill(up_operator, 0) != 0; }, 15s)) << "the operator of flotilla up did not stop";

  std::vector<Stopped> operators;
  for (int i = 0; i < 2; ++i) {
    auto candidate =
        with_flag(argv, "--metrics-addr", "127.0.0.1:" + std::to_string(flotilla::process::pick_free_port()));
    candidate =
        with_flag(candidate, "--health-addr", "127.0.0.1:" + std::to_string(flotilla::process::pick_free_port()));
    candidate.push_back("--leader-elect");
    operators.push_back(
        Stopped{start(candidate, dir_ / ("state/operator-elect-" + std::to_string(i) + ".log")), 10000ms});
  }
  auto holder = [&] { return kubectl("get lease flotilla-operator -o 'jsonpath={.spec.holderIdentity}'").output; };
  auto pid_of = [](const std::string& identity) { return std::atoi(identity.substr(identity.rfind('_') + 1).c_str()); };
  ASSERT_TRUE(wait_for([&] { return !holder().empty(); }, 30s)) << kubectl("get lease -o yaml").output;
  const std::string first = holder();
  const pid_t leader = pid_of(first);
  ASSERT_TRUE(leader == operators[0].child.pid() || leader == operators[1].child.pid()) << first;

  apply_job(400);
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Running"; }, 60s)) << field(".status") << "\n"
                                                                                  << events();
  ASSERT_EQ(::kill(leader, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string h = holder();
        return !h.empty() && h != first;
      },
      40s))
      << kubectl("get lease flotilla-operator -o yaml").output;
  const double handover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const flotilla::kube::LeaderElectionConfig defaults;
  const double lease_s = std::chrono::duration<double>(defaults.lease_duration).count();
  const double retry_s = std::chrono::duration<double>(defaults.retry_period).count();
  // The standby saw the last renewal at most one jittered retry period before the kill, and
  // waits a full lease duration from then; it notices expiry at its next poll. The 0.3 s
  // slack is this test's own polling.
  EXPECT_GE(handover_s, lease_s - retry_s * flotilla::kube::kLeaderElectionJitterFactor)
      << "the standby took a Lease that had not expired";
  EXPECT_LE(handover_s, lease_s + 2 * retry_s * flotilla::kube::kLeaderElectionJitterFactor + 0.3 + 2.0)
      << "handover took longer than the lease bounds";
  EXPECT_EQ(pid_of(holder()), leader == operators[0].child.pid() ? operators[1].child.pid() : operators[0].child.pid());
  std::printf("leader SIGKILLed; handover after %.1f s (lease %.0f s, retry %.0f s)\n", handover_s, lease_s, retry_s);

  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 150s)) << field(".status") << "\n"
                                                                                     << events();
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(400));
}

// The API server stops (SIGTERM: it terminates every pod process first, as a node reboot would)
// and comes back on the same address with its data folder. The operator, never restarted, resumes
// its watches, replaces the dead pods, and the job resumes from its last checkpoint and finishes.
TEST_F(LocalCluster, DevclusterRestartedUnderARunningJobLosesNoJob) {
  const auto state = up_state();
  const pid_t devcluster = state.value("devclusterPid", 0);
  const pid_t op = state.value("operatorPid", 0);
  ASSERT_GT(devcluster, 0);
  ASSERT_GT(op, 0);
  std::vector<std::string> argv = command_line_of(devcluster);
  ASSERT_FALSE(argv.empty());
  const std::string server = kubectl("config view --minify -o 'jsonpath={.clusters[0].cluster.server}'").output;
  const std::string port = server.substr(server.rfind(':') + 1);
  ASSERT_FALSE(port.empty()) << server;
  argv = with_flag(argv, "--listen", "127.0.0.1:" + port);

  apply_job(400);
  ASSERT_TRUE(wait_for([&] { return std::atoi(field(".status.progress.step").c_str()) >= 50; }, 90s))
      << field(".status") << "\n"
      << events();
  const std::string sidecars_pattern =
      "'^[^ ]*flotilla-sidecar --kubeconfig " + (dir_ / "state/kubeconfig").string() + "'";
  ASSERT_EQ(run_command("pgrep -f " + sidecars_pattern).exit_code, 0) << "no sidecar runs the job";
  ASSERT_EQ(::kill(devcluster, SIGTERM), 0);
  ASSERT_TRUE(wait_for([&] { return ::kill(devcluster, 0) != 0; }, 40s)) << "devcluster did not stop";
  EXPECT_NE(run_command("pgrep -f " + sidecars_pattern).exit_code, 0) << "the pod processes outlived the API server";
  Stopped restarted{start(argv, dir_ / "state/devcluster-2.log"), 30000ms};
  ASSERT_TRUE(wait_for([&] { return kubectl("get --raw /readyz").exit_code == 0; }, 30s))
      << slurp(dir_ / "state/devcluster-2.log");
  ASSERT_TRUE(wait_for([&] { return field(".status.phase") == "Succeeded"; }, 150s)) << field(".status") << "\n"
                                                                                     << events();
  EXPECT_EQ(::kill(op, 0), 0) << "the operator exited instead of resuming its watches";
  EXPECT_EQ(slurp(dir_ / "ckpt/loss.log"), reference_loss(400));
}
