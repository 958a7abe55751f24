#pragma once
// kube::WorkQueue — a de-duplicating, delaying, rate-limited queue of keys ("namespace/name"),
// with client-go's workqueue contract (k8s.io/client-go/util/workqueue):
// - An item is in at most one of: queued, or being processed. add() of an item already queued
//   does nothing (de-duplication). add() of an item being processed marks it dirty; done()
//   re-queues it then, so one key is never processed by two workers at once and no add is lost.
// - get() blocks until an item is available, and returns nullopt once shut_down() was called and
//   the queue is empty (queued items are still handed out; delayed items are dropped).
// - add_after(item, d) queues the item once d has passed on the injected clock; a second
//   add_after for an item already waiting keeps the earlier time.
// - add_rate_limited(item) = add_after(item, rate_limiter.when(item)); forget(item) resets the
//   item's backoff after a success; num_requeues(item) reports it.
// - Thread-safe: any number of producers and workers.
// Caveat: items are strings; controllers queue keys and read the object from the cache.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "kube/clock.h"
#include "kube/rate_limiter.h"

namespace flotilla::kube {

class WorkQueue {
 public:
  // Defaults: the real clock and client-go's default controller rate limiter.
  WorkQueue();
  WorkQueue(std::shared_ptr<const Clock> clock, std::unique_ptr<RateLimiter> limiter);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void add(const std::string& item);
  void add_after(const std::string& item, Clock::duration delay);
  void add_rate_limited(const std::string& item);
  void forget(const std::string& item);
  int num_requeues(const std::string& item);

  std::optional<std::string> get();
  // Like get(), but gives up (nullopt) once `timeout` has passed on the queue's clock.
  std::optional<std::string> get_for(Clock::duration timeout);
  void done(const std::string& item);

  void shut_down();
  // Shuts down, then waits until every item handed out by get() is done().
  void shut_down_with_drain();
  bool shutting_down() const;

  size_t len() const;          // items ready to be handed out
  size_t waiting_len() const;  // items delayed by add_after / add_rate_limited

 private:
  void add_locked(const std::string& item);
  void promote_ready_locked(Clock::time_point now);
  std::optional<std::string> pop_locked();

  std::shared_ptr<const Clock> clock_;
  std::unique_ptr<RateLimiter> limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;
  std::set<std::string> processing_;
  std::map<std::string, Clock::time_point> waiting_;  // item → ready time
  bool shutting_down_ = false;
};

}  // namespace flotilla::kube
