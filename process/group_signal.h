// Signalling a whole process group (every process whose pgid is `pgid`), the way a kubelet
// stops a container or a launcher stops its ranks.
//
// Guarantees: signal_group(pgid, sig) is kill(-pgid, sig) with a guard: pgid <= 1 is refused
//   (kill(-1) would signal every process we may signal; kill(0) our own group). group_alive()
//   says whether any process (zombies included) is still in the group.
// Assumes: the group was created by spawn() with Isolation::kGroup or kSession (the child's
//   pid is its pgid).
// Caveats: a process that called setpgid()/setsid() itself has left the group; find it
//   through proc_table.h (descendants, session, environment marker).
#pragma once

#include <sys/types.h>

namespace flotilla::process {

// False when the group does not exist (any more) or pgid is not a valid group id.
bool signal_group(pid_t pgid, int sig);
bool group_alive(pid_t pgid);

}  // namespace flotilla::process
