#include "kube/backoff.h"

#include <algorithm>

namespace flotilla::kube {

Backoff::Backoff(BackoffPolicy policy, uint64_t seed)
    : policy_(policy), rng_(seed), current_ms_(static_cast<double>(policy.initial.count())) {}

std::chrono::milliseconds Backoff::next() {
  double base = std::min(current_ms_, static_cast<double>(policy_.max.count()));
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  double delay = base * (1.0 + policy_.jitter * u);
  current_ms_ = std::min(current_ms_ * policy_.factor, static_cast<double>(policy_.max.count()));
  ++attempts_;
  return std::chrono::milliseconds(static_cast<long>(delay));
}

void Backoff::reset() {
  current_ms_ = static_cast<double>(policy_.initial.count());
  attempts_ = 0;
}

}  // namespace flotilla::kube
