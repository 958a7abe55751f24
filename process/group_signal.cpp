#include "process/group_signal.h"

#include <signal.h>

namespace flotilla::process {

bool signal_group(pid_t pgid, int sig) {
  if (pgid <= 1) return false;
  return ::kill(-pgid, sig) == 0;
}

bool group_alive(pid_t pgid) { return signal_group(pgid, 0); }

}  // namespace flotilla::process
