// Virtual kubelet and scheduler: pods become real local processes on virtual GPU nodes.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

Json pod(const std::string& name, const std::string& script, const std::string& restart, Json extra_spec = Json::object()) {
  Json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name}}},
            {"spec", {{"restartPolicy", restart},
                      {"terminationGracePeriodSeconds", 5},
                      {"containers", Json::array({{{"name", "main"}, {"image", "none"},
                                                   {"command", Json::array({"/bin/sh", "-c", script})},
                                                   {"env", Json::array({{{"name", "GREETING"}, {"value", "hi-$(POD_NAME)"}}})}}})}}}};
  for (auto& [k, v] : extra_spec.items()) p["spec"][k] = v;
  return p;
}

Json gpu_limits(int n) { return {{"limits", {{"nvidia.com/gpu", std::to_string(n)}}}}; }

// Alive and not a zombie (an exited process waiting for its parent counts as dead).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

pid_t container_pid(const Json& pod) {
  std::string id = pod["status"]["containerStatuses"][0].value("containerID", "");
  return static_cast<pid_t>(std::stol(id.substr(id.find("://") + 3)));
}

class DevclusterPods : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dc.start()) << read_text(dc.dir() / "devcluster.log"); }
  Json get_pod(const std::string& name) { return dc.call("GET", "/api/v1/namespaces/default/pods/" + name).second; }
  std::string phase(const std::string& name) { return get_pod(name).value("/status/phase"_json_pointer, std::string()); }
  DevclusterProcess dc{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

}  // namespace

TEST_F(DevclusterPods, ScheduledByGpuAndSelectorRunsWithEnvAndExitIsReflected) {
  Json p = pod("job-1", "echo \"$POD_NAME $POD_NAMESPACE $NODE_NAME $FLOTILLA_VISIBLE_GPUS $FLOTILLA_GPU_TYPE $GREETING\" > out.txt; exit 3",
               "Never", {{"nodeSelector", {{"pool", "fast"}}}});
  p["spec"]["containers"][0]["resources"] = gpu_limits(2);
  auto [c, created] = dc.call("POST", "/api/v1/namespaces/default/pods", p);
  ASSERT_EQ(c, 201) << created.dump();
  ASSERT_TRUE(eventually([&] { return phase("job-1") == "Failed"; })) << get_pod("job-1").dump(2);
  Json done = get_pod("job-1");
  EXPECT_EQ(done["spec"]["nodeName"], "h100-0");
  EXPECT_EQ(done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);
  EXPECT_EQ(done["metadata"]["annotations"]["devcluster.flotilla.io/gpus"], "0,1");
  std::string uid = done["metadata"]["uid"];
  auto out = read_text(dc.data_dir() / "pods" / "default" / ("job-1-" + uid.substr(0, 8)) / "out.txt");
  EXPECT_EQ(out, "job-1 default h100-0 0,1 H100-80GB hi-job-1\n");
  // The next GPU pod on that node gets other GPUs; kubectl logs reads the container log.
  Json q = pod("job-2", "echo gpus=$FLOTILLA_VISIBLE_GPUS; exit 0", "OnFailure", {{"nodeName", "h100-0"}});
  q["spec"]["containers"][0]["resources"] = gpu_limits(2);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", q).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("job-2") == "Succeeded"; })) << get_pod("job-2").dump(2);
  auto on_h100 = dc.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dh100-0").second;
  EXPECT_EQ(on_h100["items"].size(), 2u);
  EXPECT_EQ(dc.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Da100-0").second["items"].size(), 0u);
  auto logs = dc.kubectl("logs job-2");
  EXPECT_EQ(logs.output, "gpus=0,1\n") << "job-1 finished, so its GPUs are free again";
}

// A node annotated to pull images slowly holds its pods Pending, ContainerCreating, that long
// (kubectl annotate node); nodes without it start at once.
TEST_F(DevclusterPods, ANodeEmulatingASlowImagePullHoldsItsPodsPendingThatLong) {
  ASSERT_EQ(dc.kubectl("annotate node h100-0 devcluster.flotilla.io/image-pull-seconds=2").exit_code, 0);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("slow", "sleep 30", "Never", {{"nodeName", "h100-0"}})).first,
            201);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("quick", "sleep 30", "Never", {{"nodeName", "a100-0"}})).first,
            201);
  ASSERT_TRUE(eventually([&] {
    return get_pod("slow").value("/status/containerStatuses/0/state/waiting/reason"_json_pointer, std::string()) ==
           "ContainerCreating";
  })) << get_pod("slow").dump(2);
  EXPECT_EQ(phase("slow"), "Pending");
  ASSERT_TRUE(eventually([&] { return phase("quick") == "Running"; })) << get_pod("quick").dump(2);
  EXPECT_EQ(phase("slow"), "Pending") << "still pulling while the other node's pod runs";
  ASSERT_TRUE(eventually([&] { return phase("slow") == "Running"; })) << get_pod("slow").dump(2);
  const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited_s, 2.0);
  EXPECT_LT(waited_s, 10.0);
}

TEST_F(DevclusterPods, RestartPolicyAlwaysRestartsAndUnschedulableIsReported) {
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("flaky", "exit 1", "Always")).first, 201);
  ASSERT_TRUE(eventually([&] {
    Json p = get_pod("flaky");
    return p.value("/status/containerStatuses/0/restartCount"_json_pointer, 0) >= 2;
  })) << get_pod("flaky").dump(2);
  EXPECT_EQ(phase("flaky"), "Running");
  Json big = pod("too-big", "sleep 100", "Never");
  big["spec"]["containers"][0]["resources"] = gpu_limits(16);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", big).first, 201);
  ASSERT_TRUE(eventually([&] {
    for (const auto& cnd : get_pod("too-big").value("/status/conditions"_json_pointer, Json::array()))
      if (cnd["type"] == "PodScheduled" && cnd["reason"] == "Unschedulable") return true;
    return false;
  })) << get_pod("too-big").dump(2);
  EXPECT_EQ(phase("too-big"), "Pending");
  std::string msg;
  const Json pending = get_pod("too-big");
  for (const auto& cnd : pending["status"]["conditions"])
    if (cnd["type"] == "PodScheduled") msg = cnd["message"];
  EXPECT_NE(msg.find("0/2 nodes are available"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 Insufficient nvidia.com/gpu"), std::string::npos) << msg;
}

TEST_F(DevclusterPods, DeleteSendsSigtermThenRemovesThePod) {
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods",
                    pod("server", "trap 'echo got-term > term.txt; exit 0' TERM; touch ready; while true; do sleep 0.05; done", "Always"))
                .first,
            201);
  ASSERT_TRUE(eventually([&] { return phase("server") == "Running"; }));
  Json running = get_pod("server");
  pid_t pid = container_pid(running);
  EXPECT_TRUE(alive(pid));
  std::string dir = (dc.data_dir() / "pods" / "default" / ("server-" + running["metadata"]["uid"].get<std::string>().substr(0, 8))).string();
  ASSERT_TRUE(eventually([&] { return fs::exists(fs::path(dir) / "ready"); })) << "the trap is installed";
  auto [c, deleting] = dc.call("DELETE", "/api/v1/namespaces/default/pods/server");
  EXPECT_EQ(c, 200);
  EXPECT_TRUE(deleting["metadata"].contains("deletionTimestamp"));
  ASSERT_TRUE(eventually([&] { return dc.call("GET", "/api/v1/namespaces/default/pods/server").first == 404; }));
  EXPECT_EQ(read_text(fs::path(dir) / "term.txt"), "got-term\n");
  EXPECT_TRUE(eventually([&] { return !alive(pid); }));
}

TEST_F(DevclusterPods, FailingANodeKillsItsProcessesAndFailsItsPods) {
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("victim", "sleep 300", "Always", {{"nodeName", "a100-0"}})).first, 201);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("bystander", "sleep 300", "Always", {{"nodeName", "h100-0"}})).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("victim") == "Running" && phase("bystander") == "Running"; }));
  pid_t victim = container_pid(get_pod("victim"));
  pid_t bystander = container_pid(get_pod("bystander"));
  auto r = dc.admin("fail-node a100-0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(eventually([&] { return phase("victim") == "Failed"; })) << get_pod("victim").dump(2);
  EXPECT_EQ(get_pod("victim")["status"]["reason"], "NodeLost");
  EXPECT_TRUE(eventually([&] { return !alive(victim); }));
  EXPECT_TRUE(alive(bystander));
  EXPECT_EQ(phase("bystander"), "Running");
  auto nodes = dc.kubectl("get node a100-0 --no-headers");
  EXPECT_NE(nodes.output.find("NotReady"), std::string::npos) << nodes.output;
  // New pods avoid the failed node; recovering it makes it Ready again.
  Json p = pod("after", "sleep 300", "Always");
  p["spec"]["containers"][0]["resources"] = gpu_limits(1);
  dc.call("POST", "/api/v1/namespaces/default/pods", p);
  ASSERT_TRUE(eventually([&] { return get_pod("after").value("/spec/nodeName"_json_pointer, std::string()) == "h100-0"; }));
  ASSERT_EQ(dc.admin("recover-node a100-0").exit_code, 0);
  EXPECT_TRUE(eventually([&] { return dc.kubectl("get node a100-0 --no-headers").output.find(" Ready ") != std::string::npos; }));
  // Removing a node deletes its pods and kills their processes.
  ASSERT_EQ(dc.admin("remove-node h100-0").exit_code, 0);
  EXPECT_TRUE(eventually([&] { return dc.call("GET", "/api/v1/namespaces/default/pods/bystander").first == 404; }));
  EXPECT_TRUE(eventually([&] { return !alive(bystander); }));
}

TEST_F(DevclusterPods, PauseAndArgsOnlyContainersDeleteCleanly) {
  // kubectl run puts the command in args; a container with neither runs nothing.
  auto r = dc.kubectl("run argsonly --image=busybox --restart=Never -- /bin/sh -c 'echo from-args'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(eventually([&] { return phase("argsonly") == "Succeeded"; })) << get_pod("argsonly").dump(2);
  EXPECT_EQ(dc.kubectl("logs argsonly").output, "from-args\n");
  Json p = pod("paused", "", "Always");
  p["spec"]["containers"][0].erase("command");
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", p).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("paused") == "Running"; }));
  dc.call("DELETE", "/api/v1/namespaces/default/pods/paused");
  EXPECT_TRUE(eventually([&] { return dc.call("GET", "/api/v1/namespaces/default/pods/paused").first == 404; }, 3s));
}

TEST_F(DevclusterPods, LogTailLinesCountsLinesAndABadValueIs400) {
  // The last line has no newline: it still counts as a line.
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("printer", "printf 'one\\ntwo\\nthree'", "Never")).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("printer") == "Succeeded"; })) << get_pod("printer").dump(2);
  auto log = [&](const std::string& query) {
    auto r = dc.http().send("GET", "/api/v1/namespaces/default/pods/printer/log" + query, "");
    return std::make_pair(r.response.status, r.response.body);
  };
  EXPECT_EQ(log(""), std::make_pair(200, std::string("one\ntwo\nthree")));
  EXPECT_EQ(log("?tailLines=2"), std::make_pair(200, std::string("two\nthree")));
  EXPECT_EQ(log("?tailLines=3"), std::make_pair(200, std::string("one\ntwo\nthree")));
  EXPECT_EQ(log("?tailLines=9"), std::make_pair(200, std::string("one\ntwo\nthree")));
  EXPECT_EQ(log("?tailLines=0"), std::make_pair(200, std::string()));
  auto [code, body] = log("?tailLines=two");
  EXPECT_EQ(code, 400) << body;
  EXPECT_NE(body.find("tailLines must be an integer"), std::string::npos) << body;
}

// kubectl logs -f used to print what was there and return at once, as if the process had
// stopped; --since/--timestamps/--previous were silently ignored.
TEST_F(DevclusterPods, LogFollowStreamsUntilThePodEndsAndUnsupportedOptionsSaySo) {
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods",
                    pod("ticker", "for i in 1 2 3 4; do echo tick $i; sleep 0.4; done", "Never")).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("ticker") == "Running"; })) << get_pod("ticker").dump(2);
  ASSERT_TRUE(eventually([&] { return dc.http().send("GET", "/api/v1/namespaces/default/pods/ticker/log", "").response.body.find("tick 1") !=
                                      std::string::npos; }));
  if (DevclusterProcess::have_kubectl()) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = dc.kubectl("logs -f ticker");
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "tick 1\ntick 2\ntick 3\ntick 4\n");
    EXPECT_GT(seconds, 0.6) << "returned before the container finished writing";
    EXPECT_EQ(phase("ticker"), "Succeeded");
    for (const char* option : {"--since=1s", "--timestamps", "--previous"}) {
      r = dc.kubectl(std::string("logs ticker ") + option);
      EXPECT_NE(r.exit_code, 0) << option << ": " << r.output;
      EXPECT_NE(r.output.find("devcluster"), std::string::npos) << option << ": " << r.output;
    }
  }
  ASSERT_TRUE(eventually([&] { return phase("ticker") == "Succeeded"; }));
  auto r = dc.http().send("GET", "/api/v1/namespaces/default/pods/ticker/log?limitBytes=8", "");
  EXPECT_EQ(r.response.body, "tick 1\nt");
  r = dc.http().send("GET", "/api/v1/namespaces/default/pods/ticker/log?follow=true&tailLines=1", "");
  EXPECT_EQ(r.response.body, "tick 4\n") << "following a finished pod ends after what is there";
}

TEST_F(DevclusterPods, NoProcessOutlivesDevcluster) {
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("sleeper", "sleep 300 & wait", "Always")).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("sleeper") == "Running"; }));
  pid_t pid = container_pid(get_pod("sleeper"));
  ASSERT_TRUE(alive(pid));
  // The shell's child (sleep) is in the same process group: find it.
  auto children = run_command("pgrep -g " + std::to_string(pid));
  dc.stop();
  EXPECT_TRUE(eventually([&] { return !alive(pid); }, 3s));
  std::stringstream ss(children.output);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty()) {
      EXPECT_TRUE(eventually([&] { return !alive(static_cast<pid_t>(std::stol(line))); }, 3s)) << "process " << line << " survived";
    }
}
