// What the operator last did to a job's pods and has not yet seen in its pod cache (client-go's
// ControllerExpectations, by pod name). The pod cache is a watch: right after the operator
// creates a pod, a reconcile can run on a cache without it, take that pod for missing and its
// GPUs for free, and put a second pod on the same GPUs (seen: a scale-up decided within a
// second of admission created a 2-GPU pod beside the admitted 1-GPU pod on a 2-GPU node; the
// node refused it and the job shrank). Reconciling a job waits until its cache has caught up.
//
// Guarantees: satisfied() is true once every pod created for the job appears among `pods` and
//   every pod deleted for it is absent or marked deleting, or once the expectations are older
//   than `timeout_s` (a watch event lost for good must not stall a job); a satisfied job's
//   expectations are dropped. expect() adds to what the job already expects.
// Assumes: pure (no clock: times are passed in); one instance per operator, guarded by its caller.
// Caveats: by name: a pod deleted and re-created under the same name before the cache saw the
//   deletion satisfies both at once (the reconciler tells incarnations apart by their plan epoch).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "operator/job_reconciler.h"

namespace flotilla::op {

class PodExpectations {
 public:
  explicit PodExpectations(double timeout_s = 30) : timeout_s_(timeout_s) {}
  void expect(const std::string& job, const std::vector<std::string>& created, const std::vector<std::string>& removed,
              double now_s);
  bool satisfied(const std::string& job, const std::vector<PodObservation>& pods, double now_s);
  void forget(const std::string& job) { pending_.erase(job); }

 private:
  struct Pending {
    std::set<std::string> to_appear, to_vanish;
    double since_s = 0;
  };
  std::map<std::string, Pending> pending_;
  double timeout_s_;
};

}  // namespace flotilla::op
