// Reaping one child: a non-blocking poll, a wait with a deadline, and a blocking wait.
//
// Guarantees: each call reaps at most the one pid it is given (never waitpid(-1)), so callers
//   that track several children do not steal each other's statuses; EINTR is retried; a pid
//   that is not (or no longer) our child yields ExitStatus{unknown = true} instead of hanging.
// Assumes: `pid` is a child of this process.
// Caveats: reap_until() polls (1 ms growing to 20 ms), so it returns up to 20 ms after the
//   exit; good for process management, not for latency measurements below that.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "process/exit_status.h"

namespace flotilla::process {

// The status if the child has exited (and reaps it), nullopt while it runs.
std::optional<ExitStatus> try_reap(pid_t pid);
// Whether the child has exited, without reaping it: while it stays a zombie its pid and
// group id cannot be reused, so its group can still be signalled safely.
bool has_exited(pid_t pid);
// Waits until the child exits or `deadline` passes (nullopt then; the child keeps running).
std::optional<ExitStatus> reap_until(pid_t pid, std::chrono::steady_clock::time_point deadline);
// Blocks until the child exits.
ExitStatus reap(pid_t pid);

}  // namespace flotilla::process
