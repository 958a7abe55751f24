// exponential_backoff(): the delay before retry `attempt` (1, 2, ...) of a failing thing, without
// jitter: base · 2^(attempt-1), capped at `cap`. Pure, header-only; it stops doubling at the cap,
// so no attempt count overflows. The operator's relaunches after worker failures
// (operator/crash_loop.h) and the sidecar's local restarts (trainer-sidecar/supervisor.h) both
// wait by it; kube/backoff.h is the jittered kind for API retries.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flotilla {

inline std::int64_t exponential_backoff(std::int64_t base, std::int64_t cap, int attempt) {
  std::int64_t delay = base;
  for (int i = 1; i < attempt && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

}  // namespace flotilla
