#include "process/exit_status.h"

#include <sys/wait.h>

#include <cstring>

namespace flotilla::process {

ExitStatus ExitStatus::from_wait_status(int status) {
  ExitStatus s;
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  else s.exit_code = WEXITSTATUS(status);
  return s;
}

std::string ExitStatus::describe(pid_t pid) const {
  const std::string who = "process " + std::to_string(pid);
  if (unknown) return who + " was reaped elsewhere (exit status unknown)";
  if (signal != 0)
    return who + " was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return who + " exited with code " + std::to_string(exit_code);
}

}  // namespace flotilla::process
