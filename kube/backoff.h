#pragma once
// kube::Backoff — exponential backoff with jitter (client-go's wait.Backoff shape).
// Contract: next() returns initial, initial*factor, ... capped at max, each stretched by a
// random fraction in [0, jitter) of itself: d' = d * (1 + jitter * u), u ∈ [0,1) drawn from the
// seeded generator, so a given seed gives the same sequence (tests) while processes with
// different seeds spread out (no thundering herd after an API server restart).
// reset() starts over from `initial`. Not thread-safe; one per loop.
#include <chrono>
#include <cstdint>
#include <random>

namespace flotilla::kube {

struct BackoffPolicy {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30000};
  double factor = 2.0;
  double jitter = 1.0;  // kube-rs's default watcher backoff jitters by up to 100%
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = std::random_device{}());
  std::chrono::milliseconds next();
  void reset();
  int attempts() const { return attempts_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
  double current_ms_;
  int attempts_ = 0;
};

}  // namespace flotilla::kube
