#pragma once
// kube::Controller — the controller loop (kube-rs runtime::Controller, client-go's
// controller pattern): watch a primary resource (and optionally owned resources) into caches,
// queue the keys of what changed, and call a reconcile function per key with at most one
// worker per key at a time.
//
// Contract:
// - reconcile(key, ctx) is level-based: it reads the caches (ctx.primary / ctx.owned), not the
//   event that woke it, and returns an Action or an Error.
//     Action::await_change()        → forget the key's backoff; run again on the next change;
//     Action::requeue_after(d)      → forget the backoff; run again after d (and on changes);
//     Error (any kind)              → add_rate_limited: retry with per-key exponential backoff
//                                     (error_policy may override, e.g. to drop terminal errors).
// - A change to an owned object queues its controller owner's key (ownerReferences with
//   controller: true and the primary's kind), so deleting a child wakes its parent.
// - Workers start only after every cache has synced; a deleted primary still gets one reconcile
//   (its key is queued; the cache says it is gone) so finalizer-free cleanup can run — also when
//   the deletion was only discovered by a re-list after 410 (keys that vanished are queued).
// - run(stop) blocks until stop; then the queue shuts down and the workers finish their item.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "kube/reflector.h"
#include "kube/workqueue.h"

namespace flotilla::kube {

struct Action {
  std::optional<Clock::duration> requeue;
  static Action await_change() { return {}; }
  static Action requeue_after(Clock::duration d) { return {d}; }
};

struct ReconcileContext {
  const StoreReader& primary;
  const std::vector<StoreReader>& owned;  // in the order of Controller::owns() calls
};

class Controller {
 public:
  using Reconcile = std::function<Result<Action>(const std::string& key, const ReconcileContext& ctx)>;
  // Returns the delay before retrying after an error; nullopt drops the key until its next change.
  using ErrorPolicy = std::function<std::optional<Clock::duration>(const std::string& key, const Error& error)>;

  Controller(std::shared_ptr<Client> client, Resource primary, std::string ns, Reconcile reconcile,
             std::shared_ptr<const Clock> clock = real_clock());
  ~Controller();
  // Also watch `owned` in the same namespace; its changes queue the owner's key.
  Controller& owns(Resource owned, WatcherOptions options = {});
  Controller& with_watcher_options(WatcherOptions options);
  Controller& with_workers(int workers);
  Controller& with_error_policy(ErrorPolicy policy);
  // Blocks until `stop`; returns false if the caches never synced (stop before sync).
  bool run(std::stop_token stop);
  WorkQueue& queue() { return *queue_; }
  int reconciles() const { return reconciles_.load(); }

 private:
  std::shared_ptr<Client> client_;
  Resource primary_;
  std::string ns_;
  Reconcile reconcile_;
  std::shared_ptr<const Clock> clock_;
  WatcherOptions primary_options_;
  std::vector<std::pair<Resource, WatcherOptions>> owned_specs_;
  int workers_ = 1;
  ErrorPolicy error_policy_;
  std::unique_ptr<WorkQueue> queue_;
  std::atomic<int> reconciles_{0};
};

// The key of the controller owner of `obj` if that owner is of kind `owner_kind` ("" if none).
std::string controller_owner_key(const Json& obj, const std::string& owner_kind);

}  // namespace flotilla::kube
