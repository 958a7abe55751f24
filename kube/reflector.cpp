#include "kube/reflector.h"

namespace flotilla::kube {

Reflector::Reflector(std::shared_ptr<Client> client, Resource resource, std::string ns,
                     WatcherOptions options, std::shared_ptr<const Clock> clock)
    : watcher_(std::move(client), std::move(resource), std::move(ns), std::move(options),
               std::move(clock)) {}

Reflector::~Reflector() { stop(); }

void Reflector::start(Handler handler) {
  thread_ = std::jthread([this, handler = std::move(handler)](std::stop_token stop) {
    watcher_.run(stop, [&](const WatcherEvent& e) {
      store_.apply(e);
      store_.set_resource_version(watcher_.state().resource_version);
      if (handler) handler(e);
    });
  });
}

void Reflector::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

}  // namespace flotilla::kube
