// Starting one child process: fork + exec, with everything prepared before the fork.
//
// Guarantees:
//   - argv, envp, the resolved program path, the working directory and the output files are
//     prepared in the parent; between fork and exec the child makes only async-signal-safe
//     calls (setpgid/setsid, prctl, getppid, sigprocmask, sigaction, chdir, dup2, setrlimit,
//     sched_setaffinity, write, execve, _exit), so spawning from a threaded process is safe.
//   - Isolation::kGroup: the child leads a new process group (pgid == pid), set in the child
//     and again in the parent, so the group exists before spawn() returns. kSession: a new
//     session (sid == pgid == pid, no controlling terminal). kNone: it stays in our group.
//   - parent_death_signal != 0: PR_SET_PDEATHSIG, then getppid() is compared with our pid
//     taken before fork(); if we already died in between, the child exits 127 without
//     exec'ing, so the race between fork and prctl cannot leave an orphan.
//   - The child starts with an empty signal mask and default SIGTERM/SIGINT/SIGHUP/SIGPIPE/
//     SIGCHLD dispositions (a launcher's handlers or a server's blocked signals do not leak).
//   - stdout_path / stderr_path: appended to (created 0644); the same path for both shares one
//     descriptor, so lines interleave in write order. Empty = inherited. stdin_path likewise.
//   - A program without '/' is looked up in PATH (the child's PATH if env sets one).
//   - Failure before exec (chdir, exec itself): the child writes "<what> failed: <program>"
//     to its stderr and exits 126 (chdir) or 127 (exec); with exec_failure = kThrow spawn()
//     reaps it and throws std::system_error with the errno and the program instead.
// Assumes: Linux (prctl, pipe2); the returned Child owns and reaps the process (child.h).
// Caveats: file descriptors the caller did not mark O_CLOEXEC are inherited by the child.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "process/child.h"

namespace flotilla::process {

enum class Isolation { kNone, kGroup, kSession };
enum class ExecFailure { kThrow, kExit };

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program
  // Added to (or replacing entries of) our environment; with inherit_env = false the child
  // gets only these.
  std::map<std::string, std::string> env;
  bool inherit_env = true;
  std::filesystem::path working_dir;  // empty = ours
  std::filesystem::path stdin_path, stdout_path, stderr_path;  // empty = inherited
  Isolation isolation = Isolation::kGroup;
  int parent_death_signal = 0;  // e.g. SIGKILL; 0 = none
  std::vector<std::pair<int, rlim_t>> rlimits;  // (RLIMIT_*, soft = hard value)
  int cpu = -1;                                 // pin to this CPU; -1 = no pinning
  ExecFailure exec_failure = ExecFailure::kThrow;
};

// Throws std::system_error when fork fails, an output file cannot be opened, or (kThrow) the
// program cannot be executed.
Child spawn(const SpawnOptions& options);

}  // namespace flotilla::process
