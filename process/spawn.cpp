#include "process/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "process/reap.h"

extern char** environ;

namespace flotilla::process {
namespace {

// Closes the descriptors it holds when the parent returns (or throws).
struct Fds {
  std::vector<int> fds;
  ~Fds() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  int open(const std::filesystem::path& path, int flags) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::system_error(errno, std::generic_category(), "cannot open '" + path.string() + "'");
    fds.push_back(fd);
    return fd;
  }
};

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string resolve_program(const std::string& program, const std::map<std::string, std::string>& env,
                            bool inherit_env) {
  if (program.empty() || program.find('/') != std::string::npos) return program;
  std::string path;
  if (auto it = env.find("PATH"); it != env.end()) path = it->second;
  else if (const char* p = std::getenv("PATH"); p && inherit_env) path = p;
  else path = "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return program;  // exec fails with ENOENT, reported as usual
}

// Child side, async-signal-safe only.
[[noreturn]] void child_fail(int report_fd, int code, const char* what, const char* program) {
  int err = errno;
  (void)!::write(report_fd, &err, sizeof err);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, " failed: ", 9);
  (void)!::write(2, program, std::strlen(program));
  (void)!::write(2, "\n", 1);
  ::_exit(code);
}

}  // namespace

Child spawn(const SpawnOptions& options) {
  if (options.argv.empty()) throw std::invalid_argument("spawn: argv is empty");
  // Everything the child needs, built before fork.
  std::vector<std::string> env_strings;
  if (options.inherit_env)
    for (char** e = environ; *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq && options.env.count(std::string(*e, static_cast<std::size_t>(eq - *e)))) continue;
      env_strings.emplace_back(*e);
    }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string program = resolve_program(options.argv[0], options.env, options.inherit_env);
  const std::string workdir = options.working_dir.string();

  Fds fds;
  const int in_fd = options.stdin_path.empty() ? -1 : fds.open(options.stdin_path, O_RDONLY);
  const int out_fd = options.stdout_path.empty()
                         ? -1
                         : fds.open(options.stdout_path, O_WRONLY | O_CREAT | O_APPEND);
  const int err_fd = options.stderr_path.empty()
                         ? -1
                         : (options.stderr_path == options.stdout_path
                                ? out_fd
                                : fds.open(options.stderr_path, O_WRONLY | O_CREAT | O_APPEND));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "spawn: pipe2");
  fds.fds.push_back(report[0]);
  fds.fds.push_back(report[1]);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (options.cpu >= 0) CPU_SET(options.cpu, &cpus);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    // Child: async-signal-safe calls only from here on.
    if (options.isolation == Isolation::kSession) ::setsid();
    else if (options.isolation == Isolation::kGroup) ::setpgid(0, 0);
    if (options.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT, SIGUSR1, SIGUSR2})
      ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const auto& [resource, value] : options.rlimits) {
      rlimit lim{value, value};
      ::setrlimit(resource, &lim);
    }
    if (options.cpu >= 0) ::sched_setaffinity(0, sizeof cpus, &cpus);
    if (out_fd >= 0) ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    if (in_fd >= 0) ::dup2(in_fd, 0);
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0)
      child_fail(report[1], 126, "chdir", workdir.c_str());
    ::execve(program.c_str(), argv.data(), envp.data());
    child_fail(report[1], 127, "exec", program.c_str());
  }
  if (options.isolation == Isolation::kGroup) ::setpgid(pid, pid);  // no window before return
  const pid_t pgid = options.isolation == Isolation::kNone ? 0 : pid;
  ::close(report[1]);
  fds.fds.pop_back();
  // The pipe closes on exec (CLOEXEC) or carries the child's errno.
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(report[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  Child child(pid, pgid);
  if (n == static_cast<ssize_t>(sizeof child_errno) && options.exec_failure == ExecFailure::kThrow) {
    child.wait();
    throw std::system_error(child_errno, std::generic_category(),
                            "cannot start '" + options.argv[0] + "'");
  }
  return child;
}

}  // namespace flotilla::process
