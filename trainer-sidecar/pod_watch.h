// The sidecar's view of its own pod: a watch on exactly that pod (field selector
// metadata.name=<pod>) through kube/watcher.h on a background thread, keeping the latest
// annotations. The plan changes in place, so a watch sees a new epoch as soon as the operator
// patches it, without polling the API server.
//
// Guarantees: annotations() returns the annotations of the newest version seen (empty object
//   before the first list); deleted() turns true once the pod is seen deleted. The watcher
//   resumes dropped streams and re-lists on 410 (kube/watcher.h).
// Assumes: the client may be shared; the thread stops in the destructor.
// Caveats: the view lags the API server by one watch event.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"

namespace flotilla::sidecar {

class OwnPodWatch {
 public:
  OwnPodWatch(std::shared_ptr<kube::Client> client, std::string ns, std::string name);
  ~OwnPodWatch();
  kube::Json annotations() const;
  bool seen() const;
  bool deleted() const;

 private:
  mutable std::mutex mu_;
  kube::Json annotations_ = kube::Json::object();
  bool seen_ = false, deleted_ = false;
  std::jthread thread_;
};

}  // namespace flotilla::sidecar
