// Reading the process table from /proc: who is whose child, which group and session each
// process is in, when it started, and what environment it was started with.
//
// Guarantees:
//   - read_proc_stat() parses /proc/<pid>/stat safely (the command name may hold spaces and
//     parentheses: fields are read after the last ')'); start_time is field 22, in clock ticks
//     since boot, which together with the pid names a process uniquely (a reused pid has a
//     later start time).
//   - descendants() follows ppid links from `root` through a snapshot; processes that were
//     reparented (their parent died) are no longer descendants; find those by session,
//     group or environment.
//   - environ_has() matches one exact "NAME=value" entry of the environment the process was
//     exec'ed with (/proc/<pid>/environ); it survives setsid(), setpgid() and reparenting.
// Assumes: Linux /proc; processes of our own user (others' environ is not readable).
// Caveats: a snapshot is stale the moment it is taken: processes may exit or start. Callers
//   that kill what they find should loop until a snapshot finds nothing.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::process {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;    // parent; 1 (or a subreaper) once the parent has died
  pid_t pgid = 0;    // process group, what group signals reach
  pid_t sid = 0;     // session; setsid'd descendants are found by this, not by ppid
  char state = '?';  // 'R', 'S', 'Z' (zombie), ...
  unsigned long long start_time = 0;  // clock ticks since boot (field 22)
};

std::optional<ProcStat> read_proc_stat(pid_t pid);
// Parses the text of a /proc/<pid>/stat file (exposed for tests).
std::optional<ProcStat> parse_proc_stat(std::string_view text);
// Start time of a live process; nullopt when it is gone.
std::optional<unsigned long long> process_start_time(pid_t pid);
// Every process visible in /proc.
std::vector<ProcStat> list_processes();
// Pids reachable from root by ppid links (root excluded).
std::vector<pid_t> descendants(pid_t root, const std::vector<ProcStat>& table);
bool environ_has(pid_t pid, std::string_view entry);

}  // namespace flotilla::process
