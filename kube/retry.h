#pragma once
// retry_on_conflict — client-go's retry.RetryOnConflict: runs `attempt` (which must re-read the
// object and re-apply its change each time, since a Conflict means its copy was stale) until it
// succeeds, fails with anything but Conflict, or `policy.steps` attempts were made; sleeps with
// jittered backoff between attempts. Returns the last attempt's Result.
// client-go's DefaultRetry: 5 steps, 10 ms, factor 1.0, jitter 0.1.
#include <chrono>

#include "kube/backoff.h"
#include "kube/clock.h"
#include "kube/error.h"

namespace flotilla::kube {

struct RetryPolicy {
  int steps = 5;
  std::chrono::milliseconds delay{10};
  double factor = 1.0;
  double jitter = 0.1;
};

template <class Attempt>
auto retry_on_conflict(Attempt&& attempt, RetryPolicy policy = {},
                       const Clock& clock = *real_clock()) -> decltype(attempt()) {
  Backoff backoff({policy.delay, std::chrono::milliseconds(policy.delay * 1000), policy.factor,
                   policy.jitter});
  for (int i = 1;; ++i) {
    auto result = attempt();
    if (result.ok() || !result.is(ErrorKind::Conflict) || i >= policy.steps) return result;
    clock.sleep_for(backoff.next(), {});
  }
}

}  // namespace flotilla::kube
