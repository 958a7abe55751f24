// Waiting for another process to reach a state (a server answering, a pod in a phase, a file
// appearing): poll a condition until it holds or a deadline passes.
//
// Guarantees: `condition` is tried at once, then every `period`, and once more at the deadline,
//   so a condition that became true during the last sleep is not reported as a timeout; returns
//   whether it held.
// Assumes: `condition` is cheap next to `period` and has no side effect the caller minds
//   repeating.
// Caveats: real time (steady clock); the wait can overrun `limit` by one `period` plus one call.
#pragma once

#include <chrono>
#include <thread>

namespace flotilla::process {

template <class Condition>
bool poll_until(Condition&& condition, std::chrono::milliseconds limit,
                std::chrono::milliseconds period = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(period);
  }
  return condition();
}

}  // namespace flotilla::process
