#pragma once
// Rate limiters for the work queue, with client-go's contracts (k8s.io/client-go/util/workqueue):
// - when(item) returns how long to wait before the item may be processed again, and counts the
//   attempt; forget(item) clears the item's history after it succeeded; num_requeues(item) is the
//   number of when() calls since the last forget().
// - ItemExponentialRateLimiter: base * 2^failures, capped at max (client-go default 5 ms..1000 s).
// - TokenBucketRateLimiter: an overall bucket of `burst` tokens refilled at `qps`; when() reserves
//   a token and returns the time until it is available (golang.org/x/time/rate Reserve().Delay()).
//   It does not track items: num_requeues is 0 and forget() does nothing.
// - MaxOfRateLimiter: the longest delay of its parts (client-go's DefaultControllerRateLimiter is
//   MaxOf(ItemExponential(5ms, 1000s), TokenBucket(10 qps, 100 burst))).
// All are thread-safe; time comes from the injected Clock.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/clock.h"

namespace flotilla::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  virtual Clock::duration when(const std::string& item) = 0;
  virtual void forget(const std::string& item) = 0;
  virtual int num_requeues(const std::string& item) = 0;
};

class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  ItemExponentialRateLimiter(Clock::duration base_delay, Clock::duration max_delay);
  Clock::duration when(const std::string& item) override;
  void forget(const std::string& item) override;
  int num_requeues(const std::string& item) override;

 private:
  std::mutex mu_;
  Clock::duration base_, max_;
  std::map<std::string, int> failures_;
};

class TokenBucketRateLimiter final : public RateLimiter {
 public:
  TokenBucketRateLimiter(double qps, int burst, std::shared_ptr<const Clock> clock);
  Clock::duration when(const std::string& item) override;
  void forget(const std::string&) override {}
  int num_requeues(const std::string&) override { return 0; }

 private:
  std::mutex mu_;
  double qps_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
  std::shared_ptr<const Clock> clock_;
};

class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  Clock::duration when(const std::string& item) override;
  void forget(const std::string& item) override;
  int num_requeues(const std::string& item) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// client-go's DefaultControllerRateLimiter.
std::unique_ptr<RateLimiter> default_controller_rate_limiter(std::shared_ptr<const Clock> clock);

}  // namespace flotilla::kube
