// How a child process ended, decoded from a waitpid() status.
//
// Guarantees: exactly one of exit_code / signal is meaningful (signal == 0 means it exited);
//   describe() is one line in the form the launcher prints ("process 12 exited with code 1",
//   "process 12 was killed by signal 9 (Killed)").
// Caveats: `unknown` is set when the child was reaped by someone else (waitpid gave ECHILD);
//   its code and signal are then 0 and mean nothing.
#pragma once

#include <sys/types.h>

#include <string>

namespace flotilla::process {

struct ExitStatus {
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the signal that killed it, 0 when it exited
  bool unknown = false;

  bool ok() const { return !unknown && signal == 0 && exit_code == 0; }
  // A shell's $?: the exit code, or 128 + signal.
  int shell_code() const { return signal != 0 ? 128 + signal : exit_code; }
  std::string describe(pid_t pid) const;

  static ExitStatus from_wait_status(int status);
};

}  // namespace flotilla::process
