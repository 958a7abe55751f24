// The process-wide stop flag: SIGTERM/SIGINT set it, long-running loops poll it.
//
// Guarantees: install_stop_handlers() makes SIGTERM and SIGINT set the flag (SA_RESTART, the
//   handler only stores to a volatile sig_atomic_t); request_stop() sets it from code;
//   stop_requested() reads it. Children started by spawn() get default dispositions back.
// Caveats: one flag per process (a signal handler cannot carry context); nothing clears it.
#pragma once

namespace flotilla::process {

void install_stop_handlers();
bool stop_requested();
void request_stop();

}  // namespace flotilla::process
