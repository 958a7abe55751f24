#pragma once
// kube::Controller — the controller loop (kube-rs runtime::Controller, client-go's
// controller pattern): watch a primary resource (and optionally owned and other watched
// resources) into caches, queue the keys of what changed, and call a reconcile function per key
// with at most one worker per key at a time.
//
// Contract:
// - reconcile(key, ctx) is level-based: it reads the caches (ctx.primary / ctx.owned /
//   ctx.watched), not the event that woke it, and returns an Action or an Error.
//     Action::await_change()        → forget the key's backoff; run again on the next change;
//     Action::requeue_after(d)      → forget the backoff; run again after d (and on changes);
//     Error (any kind)              → add_rate_limited: retry with per-key exponential backoff
//                                     (error_policy may override, e.g. to drop terminal errors).
// - A change to an owned object queues its controller owner's key (ownerReferences with
//   controller: true and the primary's kind), so deleting a child wakes its parent.
// - A change to a watched object (watches(); any resource, cluster-scoped like Nodes or
//   namespaced) queues the primary keys its mapper returns for the object (controller-runtime's
//   EnqueueRequestsFromMapFunc, kube-rs's Controller::watches). A deleted object is mapped from
//   its last state, also when the deletion was only found by a re-list. The mapper runs on the
//   watch thread: it must be quick and must not block; if it throws, that event maps to nothing.
// - With with_cluster_pass(), every change of every resource (primary, owned, watched) and
//   every (re-)list also queues one reserved key (cluster_pass_key() unless named), and it is
//   queued once when the caches have synced. The work queue de-duplicates it, so a burst of
//   changes gives one or a few cluster passes, never one per event; reconcile recognises the
//   key (it names no object) and makes one pass over the whole caches, e.g. an allocator over
//   all jobs, nodes and pods. Per-object keys keep being reconciled beside it.
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
  const std::vector<StoreReader>& owned;    // in the order of Controller::owns() calls
  const std::vector<StoreReader>& watched;  // in the order of Controller::watches() calls
};

// The default key of the cluster-wide pass: "\0cluster". It starts with a NUL byte, which no
// object name can hold, so it never equals a primary's "namespace/name" or "name" key.
const std::string& cluster_pass_key();

class Controller {
 public:
  using Reconcile = std::function<Result<Action>(const std::string& key, const ReconcileContext& ctx)>;
  // Returns the delay before retrying after an error; nullopt drops the key until its next change.
  using ErrorPolicy = std::function<std::optional<Clock::duration>(const std::string& key, const Error& error)>;

  Controller(std::shared_ptr<Client> client, Resource primary, std::string ns, Reconcile reconcile,
             std::shared_ptr<const Clock> clock = real_clock());
  ~Controller();
  // Primary keys ("namespace/name", or "name" for a cluster-scoped primary) to reconcile
  // when `obj` (an object of a watched resource) changes; may be empty.
  using Mapper = std::function<std::vector<std::string>(const Json& obj)>;

  // Also watch `owned` in the same namespace; its changes queue the owner's key.
  Controller& owns(Resource owned, WatcherOptions options = {});
  // Also watch `resource` and queue mapper(obj)'s keys on each change of obj. A namespaced
  // resource is watched in `ns` (nullopt: the controller's namespace; "": all namespaces);
  // a cluster-scoped one everywhere.
  Controller& watches(Resource resource, Mapper mapper, WatcherOptions options = {},
                      std::optional<std::string> ns = std::nullopt);
  // Also queue `key` on every change of every watched resource and once after the caches
  // synced (see the contract above).
  Controller& with_cluster_pass(std::string key = cluster_pass_key());
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
  struct WatchSpec {
    Resource resource;
    Mapper mapper;
    WatcherOptions options;
    std::string ns;
  };
  std::vector<WatchSpec> watch_specs_;
  std::optional<std::string> cluster_pass_;

  void queue_cluster_pass();
  void start_watched(Reflector& reflector, const Mapper& mapper);
  int workers_ = 1;
  ErrorPolicy error_policy_;
  std::unique_ptr<WorkQueue> queue_;
  std::atomic<int> reconciles_{0};
};

// The key of the controller owner of `obj` if that owner is of kind `owner_kind` ("" if none).
std::string controller_owner_key(const Json& obj, const std::string& owner_kind);

}  // namespace flotilla::kube
