#include "worker/runtime/process_group.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace flotilla::worker {
namespace {

volatile std::sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

}  // namespace

std::string ChildExit::describe() const {
  if (signal != 0)
    return "process " + std::to_string(pid) + " was killed by signal " + std::to_string(signal) +
           " (" + strsignal(signal) + ")";
  return "process " + std::to_string(pid) + " exited with code " + std::to_string(exit_code);
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }

ProcessGroup::~ProcessGroup() {
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    ::kill(pids_[i], SIGKILL);
    int status = 0;
    ::waitpid(pids_[i], &status, 0);
  }
}

pid_t ProcessGroup::spawn(const std::string& program, const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& extra_env) {
  // Build argv/envp before fork: the child must only call async-signal-safe functions.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    auto eq = entry.find('=');
    if (eq != std::string::npos && extra_env.count(entry.substr(0, eq))) continue;
    env_strings.push_back(entry);
  }
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    // A fresh signal state: the launcher's handlers must not leak into ranks.
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  pids_.push_back(pid);
  reaped_.push_back(false);
  return pid;
}

void ProcessGroup::signal_all(int sig) {
  for (std::size_t i = 0; i < pids_.size(); ++i)
    if (!reaped_[i]) ::kill(pids_[i], sig);
}

ProcessGroup::Result ProcessGroup::wait_all(std::chrono::milliseconds kill_grace) {
  Result result;
  result.exits.resize(pids_.size());
  bool forwarded_stop = false;
  bool kill_pending = false;
  bool sent_kill = false;
  auto kill_at = std::chrono::steady_clock::now();
  std::size_t alive = 0;
  for (bool r : reaped_) alive += r ? 0 : 1;
  while (alive > 0) {
    if (stop_requested() && !forwarded_stop) {
      signal_all(SIGTERM);
      forwarded_stop = true;
    }
    if (kill_pending && std::chrono::steady_clock::now() >= kill_at) {
      signal_all(SIGKILL);
      kill_pending = false;
      sent_kill = true;
    }
    bool any = false;
    for (std::size_t i = 0; i < pids_.size(); ++i) {
      if (reaped_[i]) continue;
      int status = 0;
      pid_t pid = ::waitpid(pids_[i], &status, WNOHANG);
      if (pid != pids_[i]) continue;
      any = true;
      reaped_[i] = true;
      --alive;
      ChildExit exit;
      exit.pid = pid;
      if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
      else exit.exit_code = WEXITSTATUS(status);
      exit.killed_by_group = sent_kill && exit.signal == SIGKILL;
      result.exits[i] = exit;
      if (!exit.ok() && !result.first_failure) {
        result.ok = false;
        result.first_failure = exit;
        signal_all(SIGTERM);
        kill_at = std::chrono::steady_clock::now() + kill_grace;
        kill_pending = true;
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot pick a free TCP port on 127.0.0.1");
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string self_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

std::optional<JobLock> JobLock::try_acquire(const std::filesystem::path& dir, pid_t* holder_pid) {
  std::filesystem::create_directories(dir);
  auto path = dir / "launcher.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open '" + path.string() + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (holder_pid) *holder_pid = n > 0 ? static_cast<pid_t>(std::atoi(buf)) : 0;
    ::close(fd);
    return std::nullopt;
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The pid is a convenience for relaunch; the lock itself is what matters.
  }
  return JobLock(fd);
}

JobLock::~JobLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool stop_running_job(const std::filesystem::path& dir, std::chrono::milliseconds timeout,
                      pid_t* stopped_pid) {
  if (stopped_pid) *stopped_pid = 0;
  pid_t holder = 0;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool signalled = false;
  while (true) {
    auto lock = JobLock::try_acquire(dir, &holder);
    if (lock) return true;  // released when `lock` goes out of scope; the caller retakes it
    if (!signalled && holder > 0) {
      ::kill(holder, SIGTERM);
      signalled = true;
      if (stopped_pid) *stopped_pid = holder;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace flotilla::worker
