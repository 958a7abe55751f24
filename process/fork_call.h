// Running a function in a forked child without exec: a memory-capped, killable sub-computation
// (bench_plan_search runs a search it may have to stop after a time limit).
//
// Guarantees: the child runs fn() with the given rlimits applied and _exit()s with its return
//   value (3 when fn throws std::bad_alloc, 4 for any other exception), never returning into
//   the caller's code; the Child handle (child.h) waits for it, kills it and reaps it. The child
//   stays in our process group (isolation kNone) unless `own_group`.
// Assumes: the caller is single-threaded. After fork only the calling thread exists in the
//   child; fn() may allocate and use the C++ library, which is only safe when no other thread
//   could have held a lock (malloc, stdio) at the fork. Threaded callers must use spawn().
// Caveats: fn shares copies of the caller's open descriptors (use a pipe to send results).
#pragma once

#include <sys/resource.h>

#include <functional>
#include <utility>
#include <vector>

#include "process/child.h"

namespace flotilla::process {

struct ForkCallOptions {
  std::vector<std::pair<int, rlim_t>> rlimits;  // (RLIMIT_*, soft = hard value)
  bool own_group = false;
};

// Throws std::system_error when fork fails.
Child fork_call(const std::function<int()>& fn, const ForkCallOptions& options = {});

}  // namespace flotilla::process
