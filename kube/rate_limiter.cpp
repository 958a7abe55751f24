#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace flotilla::kube {

ItemExponentialRateLimiter::ItemExponentialRateLimiter(Clock::duration base_delay,
                                                       Clock::duration max_delay)
    : base_(base_delay), max_(max_delay) {}

Clock::duration ItemExponentialRateLimiter::when(const std::string& item) {
  std::lock_guard lock(mu_);
  int exp = failures_[item]++;
  // Compute in double so a long failure streak saturates at max instead of overflowing.
  double delay = static_cast<double>(base_.count()) * std::pow(2.0, exp);
  if (delay >= static_cast<double>(max_.count())) return max_;
  return Clock::duration(static_cast<Clock::duration::rep>(delay));
}

void ItemExponentialRateLimiter::forget(const std::string& item) {
  std::lock_guard lock(mu_);
  failures_.erase(item);
}

int ItemExponentialRateLimiter::num_requeues(const std::string& item) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

TokenBucketRateLimiter::TokenBucketRateLimiter(double qps, int burst,
                                               std::shared_ptr<const Clock> clock)
    : qps_(qps), burst_(burst), tokens_(burst), last_(clock->now()), clock_(std::move(clock)) {}

Clock::duration TokenBucketRateLimiter::when(const std::string&) {
  std::lock_guard lock(mu_);
  auto now = clock_->now();
  if (now > last_) {
    double elapsed_s = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed_s * qps_);
    last_ = now;
  }
  tokens_ -= 1.0;  // reserve, possibly going into debt like rate.Limiter
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

Clock::duration MaxOfRateLimiter::when(const std::string& item) {
  Clock::duration longest = Clock::duration::zero();
  for (auto& l : limiters_) longest = std::max(longest, l->when(item));
  return longest;
}

void MaxOfRateLimiter::forget(const std::string& item) {
  for (auto& l : limiters_) l->forget(item);
}

int MaxOfRateLimiter::num_requeues(const std::string& item) {
  int most = 0;
  for (auto& l : limiters_) most = std::max(most, l->num_requeues(item));
  return most;
}

std::unique_ptr<RateLimiter> default_controller_rate_limiter(std::shared_ptr<const Clock> clock) {
  std::vector<std::unique_ptr<RateLimiter>> parts;
  parts.push_back(std::make_unique<ItemExponentialRateLimiter>(std::chrono::milliseconds(5),
                                                               std::chrono::seconds(1000)));
  parts.push_back(std::make_unique<TokenBucketRateLimiter>(10.0, 100, std::move(clock)));
  return std::make_unique<MaxOfRateLimiter>(std::move(parts));
}

}  // namespace flotilla::kube
