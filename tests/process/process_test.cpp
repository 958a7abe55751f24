// flotilla::process against real processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "common/text_file.h"
#include "process/child.h"
#include "process/fork_call.h"
#include "process/group_signal.h"
#include "process/job_lock.h"
#include "process/poll_until.h"
#include "process/proc_table.h"
#include "process/process_group.h"
#include "process/spawn.h"
#include "process/stop_flag.h"
#include "tests/process/lock_holder.h"

namespace fs = std::filesystem;
namespace fp = flotilla::process;
using namespace std::chrono_literals;

namespace {

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("flotilla-process-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const std::filesystem::path& path) { return flotilla::read_text(path); }

// Exists and is not a zombie.
bool alive(pid_t pid) {
  auto s = fp::read_proc_stat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5s) {
  return flotilla::process::poll_until(pred, limit, 10ms);
}

}  // namespace

TEST(Spawn, EnvironmentWorkingDirAndLogFile) {
  auto dir = fresh_dir("env");
  ::setenv("FLOTILLA_PROCESS_TEST_KEEP", "inherited", 1);
  ::setenv("FLOTILLA_PROCESS_TEST_REPLACE", "old", 1);
  fp::SpawnOptions o;
  o.argv = {"sh", "-c", "echo \"$FLOTILLA_PROCESS_TEST_KEEP $FLOTILLA_PROCESS_TEST_REPLACE $EXTRA $(pwd)\"; echo err >&2; exit 3"};
  o.env = {{"FLOTILLA_PROCESS_TEST_REPLACE", "new"}, {"EXTRA", "x y"}};
  o.working_dir = dir;
  o.stdout_path = dir / "out.log";
  o.stderr_path = dir / "out.log";
  fp::Child child = fp::spawn(o);
  EXPECT_EQ(child.pgid(), child.pid()) << "kGroup is the default";
  auto status = child.wait_for(5s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->exit_code, 3);
  EXPECT_EQ(status->signal, 0);
  EXPECT_EQ(read_file(dir / "out.log"), "inherited new x y " + fs::canonical(dir).string() + "\nerr\n");
  // A second run appends to the same log.
  o.argv = {"sh", "-c", "echo again"};
  EXPECT_TRUE(fp::spawn(o).wait().ok());
  EXPECT_NE(read_file(dir / "out.log").find("err\nagain\n"), std::string::npos);
  // Without the inherited environment only the given variables exist.
  o.inherit_env = false;
  o.env = {{"ONLY", "1"}, {"PATH", "/usr/bin:/bin"}};
  o.argv = {"sh", "-c", "echo ${FLOTILLA_PROCESS_TEST_KEEP:-unset} $ONLY"};
  EXPECT_TRUE(fp::spawn(o).wait().ok());
  EXPECT_NE(read_file(dir / "out.log").find("again\nunset 1\n"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Spawn, ExecFailureThrowsOrExits127) {
  fp::SpawnOptions o;
  o.argv = {"/nonexistent/flotilla-no-such-program"};
  o.stderr_path = "/dev/null";
  try {
    fp::spawn(o);
    FAIL() << "spawn of a missing program must throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("flotilla-no-such-program"), std::string::npos);
  }
  o.exec_failure = fp::ExecFailure::kExit;
  EXPECT_EQ(fp::spawn(o).wait().exit_code, 127);
  o.argv = {"true"};
  o.working_dir = "/nonexistent-dir";
  EXPECT_EQ(fp::spawn(o).wait().exit_code, 126);
}

TEST(Spawn, SessionIsolationLeadsItsOwnSession) {
  fp::SpawnOptions o;
  o.argv = {"sleep", "5"};
  o.isolation = fp::Isolation::kSession;
  fp::Child child = fp::spawn(o);
  auto s = fp::read_proc_stat(child.pid());
  ASSERT_TRUE(s);
  EXPECT_EQ(s->sid, child.pid());
  EXPECT_EQ(s->pgid, child.pid());
  EXPECT_EQ(s->ppid, ::getpid());
  auto status = child.terminate(2s);
  EXPECT_EQ(status.signal, SIGTERM);
}

TEST(Child, WaitDeadlineExpiresAndTheChildKeepsRunning) {
  fp::SpawnOptions o;
  o.argv = {"sleep", "30"};
  fp::Child child = fp::spawn(o);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.wait_for(200ms));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 200ms);
  EXPECT_LT(waited, 2s);
  EXPECT_TRUE(child.running());
  EXPECT_FALSE(child.poll());
  EXPECT_TRUE(child.signal(SIGKILL));
  auto status = child.wait_for(5s);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->signal, SIGKILL);
  EXPECT_EQ(status->describe(child.pid()),
            "process " + std::to_string(child.pid()) + " was killed by signal 9 (Killed)");
  EXPECT_FALSE(child.signal(SIGKILL)) << "no signal to a reaped pid";
}

TEST(Child, GroupSignalKillsGrandchildren) {
  fp::SpawnOptions o;
  o.argv = {"sh", "-c", "sleep 1001 & sleep 1002 & wait"};
  fp::Child child = fp::spawn(o);
  std::vector<pid_t> grandchildren;
  ASSERT_TRUE(eventually([&] {
    grandchildren = fp::descendants(child.pid(), fp::list_processes());
    return grandchildren.size() == 2;
  }));
  for (pid_t g : grandchildren) EXPECT_EQ(fp::read_proc_stat(g)->pgid, child.pid());
  EXPECT_TRUE(fp::group_alive(child.pgid()));
  EXPECT_TRUE(child.signal_group(SIGKILL));
  ASSERT_TRUE(child.wait_for(5s));
  for (pid_t g : grandchildren) EXPECT_TRUE(eventually([&] { return !alive(g); })) << g;
}

TEST(Child, DestructorKillsTheGroupAndReaps) {
  pid_t leader = 0;
  std::vector<pid_t> grandchildren;
  {
    fp::SpawnOptions o;
    o.argv = {"sh", "-c", "sleep 1003 & wait"};
    fp::Child child = fp::spawn(o);
    leader = child.pid();
    ASSERT_TRUE(eventually([&] {
      grandchildren = fp::descendants(leader, fp::list_processes());
      return grandchildren.size() == 1;
    }));
  }
  EXPECT_FALSE(fp::read_proc_stat(leader)) << "reaped, not a zombie";
  EXPECT_TRUE(eventually([&] { return !alive(grandchildren[0]); }));
}

// A middle process spawns a grandchild with a parent-death signal and dies: the grandchild
// gets the signal although nobody signalled it.
TEST(Spawn, ParentDeathSignalReachesTheChildWhenItsParentDies) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  fp::Child middle = fp::fork_call([&] {
    fp::SpawnOptions o;
    o.argv = {"sleep", "1004"};
    o.parent_death_signal = SIGKILL;
    fp::Child grandchild = fp::spawn(o);
    pid_t pid = grandchild.release();
    (void)!::write(fds[1], &pid, sizeof pid);
    ::usleep(200 * 1000);
    return 0;
  });
  ::close(fds[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(fds[0]);
  EXPECT_TRUE(alive(grandchild));
  ASSERT_TRUE(middle.wait_for(5s));
  EXPECT_TRUE(eventually([&] { return !alive(grandchild); })) << "grandchild " << grandchild << " outlived its parent";
}

TEST(ProcessGroup, FirstFailureStopsTheRestAndIsNamed) {
  fp::ProcessGroup group;
  pid_t ok = group.spawn("/bin/sh", {"-c", "exit 0"}, {});
  pid_t bad = group.spawn("/bin/sh", {"-c", "sleep 0.2; exit 5"}, {});
  pid_t stubborn = group.spawn("/bin/sh", {"-c", "trap '' TERM; exec sleep 30"}, {});
  const auto start = std::chrono::steady_clock::now();
  auto result = group.wait_all(300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_FALSE(result.ok);
  ASSERT_TRUE(result.first_failure);
  EXPECT_EQ(result.first_failure->pid, bad);
  EXPECT_EQ(result.first_failure->exit_code, 5);
  ASSERT_EQ(result.exits.size(), 3u);
  EXPECT_EQ(result.exits[0].pid, ok);
  EXPECT_TRUE(result.exits[0].ok());
  EXPECT_EQ(result.exits[2].pid, stubborn);
  EXPECT_TRUE(result.exits[2].killed_by_group);
}

TEST(JobLock, SecondAcquireNamesTheHolderAndStopRunningJobWaitsForRelease) {
  auto dir = fresh_dir("lock");
  pid_t holder = 0;
  auto first = fp::JobLock::try_acquire(dir, &holder);
  ASSERT_TRUE(first);
  EXPECT_FALSE(fp::JobLock::try_acquire(dir, &holder));
  EXPECT_EQ(holder, ::getpid());
  first.reset();
  // A holder in another process: stop_running_job SIGTERMs it and waits for the release.
  bool holds_lock = false;
  fp::Child other = flotilla::testing::fork_lock_holder(dir, holds_lock);
  ASSERT_TRUE(holds_lock);
  EXPECT_FALSE(fp::JobLock::try_acquire(dir, &holder));
  EXPECT_EQ(holder, other.pid());
  pid_t stopped = 0;
  EXPECT_TRUE(fp::stop_running_job(dir, 5s, &stopped));
  EXPECT_EQ(stopped, other.pid());
  auto status = other.wait_for(5s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->ok());
  EXPECT_TRUE(fp::JobLock::try_acquire(dir, &holder));
  fs::remove_all(dir);
}

TEST(ProcTable, StatParsingSurvivesOddCommandNames) {
  auto s = fp::parse_proc_stat(
      "4242 (a) b (c) S 1 4242 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 1);
  EXPECT_EQ(s->pgid, 4242);
  EXPECT_EQ(s->sid, 4240);
  EXPECT_EQ(s->start_time, 987654u);
  EXPECT_FALSE(fp::parse_proc_stat("garbage"));
  auto self = fp::read_proc_stat(::getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->ppid, ::getppid());
  EXPECT_EQ(fp::process_start_time(::getpid()), self->start_time);
}

TEST(ProcTable, EnvironmentMarkerFindsAProcessThatLeftItsSession) {
  fp::SpawnOptions o;
  const std::string mark = "FLOTILLA_PROCESS_TEST_MARK=" + std::to_string(::getpid());
  o.argv = {"sh", "-c", "setsid sleep 1005 & wait"};
  o.env = {{"FLOTILLA_PROCESS_TEST_MARK", std::to_string(::getpid())}};
  fp::Child child = fp::spawn(o);
  pid_t escaped = 0;
  ASSERT_TRUE(eventually([&] {
    for (pid_t p : fp::descendants(child.pid(), fp::list_processes()))
      if (auto s = fp::read_proc_stat(p); s && s->sid == p) escaped = p;
    return escaped != 0;
  }));
  EXPECT_TRUE(fp::environ_has(escaped, mark));
  EXPECT_FALSE(fp::environ_has(escaped, mark + "0"));
  EXPECT_FALSE(fp::environ_has(::getpid(), mark));
  ::kill(escaped, SIGKILL);
  EXPECT_TRUE(child.wait_for(5s));
}
