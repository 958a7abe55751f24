#pragma once
// kube::Store — the cache of one resource kind, fed by the watcher's events; StoreReader is its
// read-only view handed to controllers (client-go's Indexer/Lister, kube-rs's reflector Store).
//
// Contract:
// - apply() follows kube-rs's reflector: Init starts a fresh buffer, InitApply fills it, InitDone
//   swaps it in atomically (so objects deleted while the watch was down disappear, and readers
//   never see a half-listed cache); Apply inserts/replaces by key; Delete removes by key.
// - Keys are "namespace/name" ("name" for cluster-scoped objects).
// - Readers get copies of objects (a reconcile may not mutate the cache by accident); the store
//   is safe for one writer and any number of readers on other threads.
// - has_synced() is true after the first InitDone, and stays true through later re-lists.
// Caveat: only the latest version of each object is kept; no indexes besides the key.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "kube/object.h"
#include "kube/watcher_machine.h"

namespace flotilla::kube {

class StoreReader;

class Store {
 public:
  Store();
  void apply(const WatcherEvent& event);
  void set_resource_version(const std::string& rv);
  StoreReader reader() const;

 private:
  friend class StoreReader;
  struct State {
    mutable std::shared_mutex mu;
    std::map<std::string, Json> objects;
    std::string resource_version;
    bool synced = false;
    mutable std::mutex sync_mu;
    mutable std::condition_variable synced_cv;
  };
  std::shared_ptr<State> state_;
  std::optional<std::map<std::string, Json>> buffer_;  // between Init and InitDone
};

class StoreReader {
 public:
  std::optional<Json> get(const std::string& key) const;
  std::optional<Json> get(const std::string& ns, const std::string& name) const;
  std::vector<Json> list() const;
  std::vector<Json> list_namespace(const std::string& ns) const;
  // Visits every object in key order without copying it, under the store's read lock: `visit`
  // must be quick and must not call back into this store (writers wait meanwhile).
  void for_each(const std::function<void(const Json&)>& visit) const;
  std::vector<std::string> keys() const;
  size_t size() const;
  std::string resource_version() const;  // of the last list or event applied
  bool has_synced() const;
  // Blocks (real time) until synced or the timeout passed; returns has_synced().
  bool wait_synced(std::chrono::milliseconds timeout) const;

 private:
  friend class Store;
  explicit StoreReader(std::shared_ptr<const Store::State> state) : state_(std::move(state)) {}
  std::shared_ptr<const Store::State> state_;
};

}  // namespace flotilla::kube
