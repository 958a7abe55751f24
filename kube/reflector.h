#pragma once
// kube::Reflector — a Watcher feeding a Store on its own thread, with an optional handler that
// sees each event after the store has applied it (so a handler that enqueues a key and a worker
// that reads the store never race backwards).
//
// Contract: start() spawns the thread; stop() (or the destructor) requests stop and joins.
// reader() is valid for the Reflector's lifetime and after (it shares the store's state).
// The store's resource_version follows the watcher's resume point.
#include <functional>
#include <memory>
#include <thread>

#include "kube/store.h"
#include "kube/watcher.h"

namespace flotilla::kube {

class Reflector {
 public:
  using Handler = std::function<void(const WatcherEvent&)>;
  Reflector(std::shared_ptr<Client> client, Resource resource, std::string ns,
            WatcherOptions options = {}, std::shared_ptr<const Clock> clock = real_clock());
  ~Reflector();
  void start(Handler handler = {});
  void stop();
  StoreReader reader() const { return store_.reader(); }
  WatcherStats stats() const { return watcher_.stats(); }
  WatcherState state() const { return watcher_.state(); }

 private:
  Watcher watcher_;
  Store store_;
  std::jthread thread_;
};

}  // namespace flotilla::kube
