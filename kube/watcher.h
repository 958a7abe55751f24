#pragma once
// kube::Watcher — drives the pure watcher state machine (watcher_machine.h) against a Client:
// list (paged), then watch from the list's resourceVersion, resume a dropped watch from the last
// resourceVersion seen, re-list on 410 Gone, back off with jitter after failures.
//
// Contract:
// - run() blocks until `stop` is requested, and calls on_event for every WatcherEvent in order,
//   on the calling thread. Between a successful list and the end of time, every change the
//   server reports is delivered exactly once (the resume point is the last resourceVersion the
//   server sent, bookmarks included), except across a re-list, which re-delivers the whole set
//   as Init/InitApply/InitDone.
// - Backoff (kube-rs defaults: 800 ms doubling to 30 s, up to 100% jitter) after any failed
//   request; reset after a watch delivers an event. A 410 re-lists at once, unless two re-lists
//   happen with no watch event between them (then it backs off too).
// - Sleeps use the injected clock, so stop wakes them at once.
// Caveats: one resource type and namespace (or all namespaces) per watcher.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/clock.h"
#include "kube/watcher_machine.h"

namespace flotilla::kube {

struct WatcherOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 500;
  int watch_timeout_seconds = 290;
  bool allow_bookmarks = true;
  BackoffPolicy backoff;
  uint64_t seed = 0;  // 0 → random
  // Called (on the watcher's thread) with each failed list or watch request before the backoff,
  // so a shell can say why its cache is not filling (a 403 names the missing RBAC rule).
  std::function<void(const Error&)> on_request_failed;
};

struct WatcherStats {
  int lists_completed = 0;  // InitDone count
  int relists_on_gone = 0;
  int watches_opened = 0;
  int failures = 0;
};

class Watcher {
 public:
  Watcher(std::shared_ptr<Client> client, Resource resource, std::string ns,
          WatcherOptions options = {}, std::shared_ptr<const Clock> clock = real_clock());
  void run(std::stop_token stop, const std::function<void(const WatcherEvent&)>& on_event);
  WatcherState state() const;
  WatcherStats stats() const;

 private:
  // Applies one input; returns whether to back off.
  bool apply(WatcherInput input, const std::function<void(const WatcherEvent&)>& on_event);

  std::shared_ptr<Client> client_;
  Resource resource_;
  std::string ns_;
  WatcherOptions options_;
  std::shared_ptr<const Clock> clock_;
  Backoff backoff_;
  mutable std::mutex mu_;  // guards state_ and stats_ for readers on other threads
  WatcherState state_;
  WatcherStats stats_;
  int relists_without_event_ = 0;
};

}  // namespace flotilla::kube
