#include "operator/pod_expectations.h"

namespace flotilla::op {

void PodExpectations::expect(const std::string& job, const std::vector<std::string>& created,
                             const std::vector<std::string>& removed, double now_s) {
  if (created.empty() && removed.empty()) return;
  Pending& p = pending_[job];
  if (p.to_appear.empty() && p.to_vanish.empty()) p.since_s = now_s;
  for (const std::string& name : created) {
    p.to_appear.insert(name);
    p.to_vanish.erase(name);
  }
  for (const std::string& name : removed) {
    p.to_vanish.insert(name);
    p.to_appear.erase(name);
  }
}

bool PodExpectations::satisfied(const std::string& job, const std::vector<PodObservation>& pods, double now_s) {
  auto it = pending_.find(job);
  if (it == pending_.end()) return true;
  Pending& p = it->second;
  for (const PodObservation& pod : pods) {
    p.to_appear.erase(pod.name);
    if (pod.deleting) p.to_vanish.erase(pod.name);
  }
  // A pod to vanish that the cache no longer lists at all is gone.
  for (auto name = p.to_vanish.begin(); name != p.to_vanish.end();) {
    bool listed = false;
    for (const PodObservation& pod : pods) listed = listed || pod.name == *name;
    name = listed ? std::next(name) : p.to_vanish.erase(name);
  }
  if ((p.to_appear.empty() && p.to_vanish.empty()) || now_s - p.since_s > timeout_s_) {
    pending_.erase(it);
    return true;
  }
  return false;
}

}  // namespace flotilla::op
