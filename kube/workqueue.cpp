#include "kube/workqueue.h"

#include <algorithm>

namespace flotilla::kube {

WorkQueue::WorkQueue() : WorkQueue(real_clock(), default_controller_rate_limiter(real_clock())) {}

WorkQueue::WorkQueue(std::shared_ptr<const Clock> clock, std::unique_ptr<RateLimiter> limiter)
    : clock_(std::move(clock)), limiter_(std::move(limiter)) {}

WorkQueue::~WorkQueue() { shut_down(); }

void WorkQueue::add_locked(const std::string& item) {
  if (shutting_down_) return;
  if (!dirty_.insert(item).second) return;  // already queued (or re-queue already pending)
  if (processing_.count(item)) return;      // done() will queue it
  queue_.push_back(item);
  cv_.notify_one();
}

void WorkQueue::add(const std::string& item) {
  std::lock_guard lock(mu_);
  add_locked(item);
}

void WorkQueue::add_after(const std::string& item, Clock::duration delay) {
  std::lock_guard lock(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::duration::zero()) {
    add_locked(item);
    return;
  }
  auto ready = clock_->now() + delay;
  auto [it, inserted] = waiting_.emplace(item, ready);
  if (!inserted && ready < it->second) it->second = ready;
  cv_.notify_all();  // a waiting get() may need to wake earlier
}

void WorkQueue::add_rate_limited(const std::string& item) { add_after(item, limiter_->when(item)); }
void WorkQueue::forget(const std::string& item) { limiter_->forget(item); }
int WorkQueue::num_requeues(const std::string& item) { return limiter_->num_requeues(item); }

void WorkQueue::promote_ready_locked(Clock::time_point now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second <= now) {
      std::string item = it->first;
      it = waiting_.erase(it);
      add_locked(item);
    } else {
      ++it;
    }
  }
}

std::optional<std::string> WorkQueue::pop_locked() {
  std::string item = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(item);
  dirty_.erase(item);
  return item;
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mu_);
  for (;;) {
    promote_ready_locked(clock_->now());
    if (!queue_.empty()) return pop_locked();
    if (shutting_down_) return std::nullopt;
    if (waiting_.empty()) {
      cv_.wait(lock);
    } else {
      auto earliest = std::min_element(waiting_.begin(), waiting_.end(), [](auto& a, auto& b) {
                        return a.second < b.second;
                      })->second;
      clock_->wait_until(lock, cv_, earliest);
    }
  }
}

std::optional<std::string> WorkQueue::get_for(Clock::duration timeout) {
  std::unique_lock lock(mu_);
  auto deadline = clock_->now() + timeout;
  for (;;) {
    auto now = clock_->now();
    promote_ready_locked(now);
    if (!queue_.empty()) return pop_locked();
    if (shutting_down_ || now >= deadline) return std::nullopt;
    auto wake = deadline;
    for (auto& [item, ready] : waiting_) wake = std::min(wake, ready);
    clock_->wait_until(lock, cv_, wake);
  }
}

void WorkQueue::done(const std::string& item) {
  std::lock_guard lock(mu_);
  processing_.erase(item);
  if (dirty_.count(item)) {
    queue_.push_back(item);
    cv_.notify_one();
  }
  if (processing_.empty()) cv_.notify_all();  // shut_down_with_drain waits for this
}

void WorkQueue::shut_down() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  waiting_.clear();
  cv_.notify_all();
}

void WorkQueue::shut_down_with_drain() {
  std::unique_lock lock(mu_);
  shutting_down_ = true;
  waiting_.clear();
  cv_.notify_all();
  cv_.wait(lock, [&] { return processing_.empty(); });
}

bool WorkQueue::shutting_down() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::len() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t WorkQueue::waiting_len() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

}  // namespace flotilla::kube
