#include "trainer-sidecar/pod_watch.h"

#include "kube/watcher.h"

namespace flotilla::sidecar {

OwnPodWatch::OwnPodWatch(std::shared_ptr<kube::Client> client, std::string ns, std::string name) {
  kube::WatcherOptions options;
  options.field_selector = "metadata.name=" + name;
  auto watcher = std::make_shared<kube::Watcher>(std::move(client), kube::resources::pods,
                                                 std::move(ns), options);
  thread_ = std::jthread([this, watcher](std::stop_token stop) {
    watcher->run(stop, [this](const kube::WatcherEvent& e) {
      std::lock_guard lock(mu_);
      if (e.kind == kube::WatcherEventKind::InitApply || e.kind == kube::WatcherEventKind::Apply) {
        annotations_ = e.object.value("/metadata/annotations"_json_pointer, kube::Json::object());
        seen_ = true;
        deleted_ = false;
      } else if (e.kind == kube::WatcherEventKind::Delete) {
        deleted_ = true;
      }
    });
  });
}

OwnPodWatch::~OwnPodWatch() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

kube::Json OwnPodWatch::annotations() const {
  std::lock_guard lock(mu_);
  return annotations_;
}
bool OwnPodWatch::seen() const {
  std::lock_guard lock(mu_);
  return seen_;
}
bool OwnPodWatch::deleted() const {
  std::lock_guard lock(mu_);
  return deleted_;
}

}  // namespace flotilla::sidecar
