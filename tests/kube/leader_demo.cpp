// kube_leader_demo: runs leader election on a Lease and prints what happens, one line each:
//   LEADING <identity>      when it starts leading
//   NEW_LEADER <identity>   when it sees a (new) leader
//   STOPPED <identity>      when it stops leading; the process then exits 0
// Usage: kube_leader_demo KUBECONFIG IDENTITY LEASE_NAME LEASE_MS RENEW_MS RETRY_MS
// Used by the failover test: two of these contend; the leader is killed; the other takes over.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/leader_election.h"

using namespace flotilla::kube;

static std::stop_source g_stop;
static std::atomic<bool> g_terminate{false};  // lock-free: safe in a signal handler

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s KUBECONFIG IDENTITY LEASE_NAME LEASE_MS RENEW_MS RETRY_MS\n", argv[0]);
    return 2;
  }
  auto cfg = load_kubeconfig(argv[1]);
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().describe().c_str());
    return 2;
  }
  auto client = Client::create(*cfg);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().describe().c_str());
    return 2;
  }
  const std::string identity = argv[2];
  LeaderElectionConfig le;
  le.lease_namespace = "default";
  le.lease_name = argv[3];
  le.identity = identity;
  le.lease_duration = std::chrono::milliseconds(std::atol(argv[4]));
  le.renew_deadline = std::chrono::milliseconds(std::atol(argv[5]));
  le.retry_period = std::chrono::milliseconds(std::atol(argv[6]));
  le.on_started_leading = [&](std::stop_token stop) {
    std::printf("LEADING %s\n", identity.c_str());
    std::fflush(stdout);
    while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  le.on_stopped_leading = [&] {
    std::printf("STOPPED %s\n", identity.c_str());
    std::fflush(stdout);
  };
  le.on_new_leader = [&](const std::string& who) {
    std::printf("NEW_LEADER %s\n", who.c_str());
    std::fflush(stdout);
  };
  // The handler only sets a flag; a thread turns it into a stop request (request_stop runs
  // callbacks that lock mutexes, which a signal handler must not).
  std::signal(SIGTERM, [](int) { g_terminate.store(true); });
  std::jthread signal_watch([](std::stop_token done) {
    while (!done.stop_requested() && !g_terminate)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    g_stop.request_stop();
  });
  try {
    LeaderElector elector(*client, le);
    elector.run(g_stop.get_token());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
