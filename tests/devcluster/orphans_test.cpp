// Issue 14 item 5: a pod's grandchildren must not outlive the pod, the node, or a devcluster
// that was SIGKILLed and restarted. Real flotilla-devcluster binary, real processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>

#include "devcluster_process.h"
#include "process/proc_table.h"

using namespace devcluster_test;
namespace fp = flotilla::process;

namespace {

Json pod(const std::string& name, const std::string& script, Json extra_spec = Json::object()) {
  Json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name}}},
            {"spec", {{"restartPolicy", "Always"},
                      {"terminationGracePeriodSeconds", 2},
                      {"containers", Json::array({{{"name", "main"}, {"image", "none"},
                                                   {"command", Json::array({"/bin/sh", "-c", script})}}})}}}};
  for (auto& [k, v] : extra_spec.items()) p["spec"][k] = v;
  return p;
}

// A sleep argument no other test (or earlier run) uses: "<seconds>.<our pid>".
std::string unique_sleep(int seconds) { return std::to_string(seconds) + "." + std::to_string(::getpid()); }

// Live (not zombie) processes whose command line is exactly `sleep <arg>`.
std::vector<pid_t> sleeps(const std::string& arg) {
  std::vector<pid_t> out;
  for (const auto& s : fp::list_processes()) {
    if (s.state == 'Z' || s.state == 'X') continue;
    const std::string cmdline = read_text("/proc/" + std::to_string(s.pid) + "/cmdline");
    if (cmdline == std::string("sleep\0", 6) + arg + std::string(1, '\0')) out.push_back(s.pid);
  }
  return out;
}

bool alive(pid_t pid) {
  auto s = fp::read_proc_stat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

pid_t container_pid(const Json& pod) {
  std::string id = pod.value("/status/containerStatuses/0/containerID"_json_pointer, std::string());
  if (id.find("://") == std::string::npos) return -1;
  return static_cast<pid_t>(std::stol(id.substr(id.find("://") + 3)));
}

class DevclusterOrphans : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dc.start()) << dc.log(); }
  void TearDown() override {
    dc.stop();
    // Whatever this test started and a failure left behind (exact pids found by argument).
    for (const auto& arg : args_)
      for (pid_t p : sleeps(arg)) ::kill(p, SIGKILL);
  }
  Json get_pod(const std::string& name) { return dc.call("GET", "/api/v1/namespaces/default/pods/" + name).second; }
  std::string phase(const std::string& name) { return get_pod(name).value("/status/phase"_json_pointer, std::string()); }
  std::string arg(int seconds) {
    args_.push_back(unique_sleep(seconds));
    return args_.back();
  }
  DevclusterProcess dc{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::vector<std::string> args_;
};

}  // namespace

// (a) `sh -c "sleep & sleep & wait"`, kill -9 of devcluster, restart: the old sleeps are reaped
// before the pod runs again, so exactly one set exists.
TEST_F(DevclusterOrphans, RestartAfterKillNineLeavesExactlyOneSetOfGrandchildren) {
  const std::string a = arg(2002), b = arg(2003);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("grandkids", "sleep " + a + " & sleep " + b + " & wait")).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("grandkids") == "Running" && sleeps(a).size() == 1 && sleeps(b).size() == 1; }))
      << get_pod("grandkids").dump(2);
  const pid_t old_leader = container_pid(get_pod("grandkids"));
  const pid_t old_a = sleeps(a)[0], old_b = sleeps(b)[0];
  ASSERT_EQ(::kill(dc.pid(), SIGKILL), 0);
  dc.stop();  // reaps the killed server
  // The shell died with devcluster (parent-death signal); its children did not.
  EXPECT_TRUE(eventually([&] { return !alive(old_leader); }, 5s));
  EXPECT_TRUE(alive(old_a));
  EXPECT_TRUE(alive(old_b));
  ASSERT_TRUE(dc.start()) << dc.log();
  ASSERT_TRUE(eventually([&] {
    const pid_t leader = container_pid(get_pod("grandkids"));
    return phase("grandkids") == "Running" && leader > 0 && leader != old_leader && sleeps(a).size() == 1 &&
           sleeps(b).size() == 1 && !alive(old_a) && !alive(old_b);
  }, 15s)) << "sleep " << a << ": " << sleeps(a).size() << " running, sleep " << b << ": " << sleeps(b).size()
           << " running; old ones alive: " << alive(old_a) << " " << alive(old_b) << "\n" << dc.log();
  // And it stays that way (no late second copy).
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(sleeps(a).size(), 1u);
  EXPECT_EQ(sleeps(b).size(), 1u);
  EXPECT_NE(dc.log().find("left by a previous run of pod default/grandkids"), std::string::npos) << dc.log();
}

// (b) A grandchild that left the pod's session with setsid dies when its node fails.
TEST_F(DevclusterOrphans, FailNodeKillsAGrandchildThatLeftTheSession) {
  const std::string c = arg(2004);
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods",
                    pod("escaper", "setsid sleep " + c + " & wait", {{"nodeName", "a100-0"}}))
                .first,
            201);
  ASSERT_TRUE(eventually([&] { return phase("escaper") == "Running" && sleeps(c).size() == 1; })) << get_pod("escaper").dump(2);
  const pid_t escaped = sleeps(c)[0];
  const pid_t leader = container_pid(get_pod("escaper"));
  auto stat = fp::read_proc_stat(escaped);
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->sid, escaped) << "setsid put it in a session of its own";
  EXPECT_NE(stat->pgid, leader);
  auto r = dc.admin("fail-node a100-0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(eventually([&] { return phase("escaper") == "Failed"; })) << get_pod("escaper").dump(2);
  EXPECT_TRUE(eventually([&] { return !alive(escaped); }, 5s)) << "sleep " << c << " (pid " << escaped << ") survived fail-node";
  EXPECT_TRUE(eventually([&] { return !alive(leader); }, 5s));
}

// Deleting the pod takes the setsid'd grandchild too, also once its parent shell is gone.
TEST_F(DevclusterOrphans, DeletingThePodKillsAReparentedGrandchild) {
  const std::string d = arg(2005);
  // The subshell exits at once: the setsid'd sleep is reparented, outside the pod's session.
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", pod("daemon", "(setsid sleep " + d + " &); exec sleep 300")).first, 201);
  ASSERT_TRUE(eventually([&] { return phase("daemon") == "Running" && sleeps(d).size() == 1; })) << get_pod("daemon").dump(2);
  const pid_t escaped = sleeps(d)[0];
  const pid_t leader = container_pid(get_pod("daemon"));
  ASSERT_TRUE(eventually([&] {
    auto s = fp::read_proc_stat(escaped);
    return s && s->ppid != leader && s->sid == escaped;
  }));
  EXPECT_EQ(dc.call("DELETE", "/api/v1/namespaces/default/pods/daemon").first, 200);
  ASSERT_TRUE(eventually([&] { return dc.call("GET", "/api/v1/namespaces/default/pods/daemon").first == 404; }));
  EXPECT_TRUE(eventually([&] { return !alive(escaped); }, 5s)) << "sleep " << d << " survived the pod";
}

// A record written just before a container's fork (marker only, no pid yet) is enough for the
// next start to find the container's processes; malformed entries are skipped with a line.
TEST_F(DevclusterOrphans, StartKillsWhatAMarkerOnlyRecordNamesAndSkipsMalformedEntries) {
  dc.stop();
  const std::string e = arg(2006);
  const std::string uid = "orphans-test-" + std::to_string(::getpid());
  fp::SpawnOptions o;
  o.argv = {"sh", "-c", "setsid sleep " + e + " & wait"};
  o.env = {{"FLOTILLA_DEVCLUSTER_CONTAINER", uid + "/main"}};
  fp::Child shell = fp::spawn(o);
  ASSERT_TRUE(eventually([&] { return sleeps(e).size() == 1; }));
  const pid_t escaped = sleeps(e)[0];
  Json records = Json::array({Json{{"pid", 0}, {"startTime", 0}, {"marker", "FLOTILLA_DEVCLUSTER_CONTAINER=" + uid + "/main"}},
                              Json{{"pid", "not a pid"}}, Json(5)});
  write_text(dc.data_dir() / "pods" / "processes.json", records.dump());
  ASSERT_TRUE(dc.start()) << dc.log();
  EXPECT_TRUE(eventually([&] { return !alive(escaped); }, 5s)) << dc.log();
  EXPECT_TRUE(shell.wait_for(5s)) << "the shell carries the marker too";
  EXPECT_NE(dc.log().find("ignoring a malformed entry"), std::string::npos) << dc.log();
  EXPECT_FALSE(fs::exists(dc.data_dir() / "pods" / "processes.json.tmp"));
}
