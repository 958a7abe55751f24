// The nodes a job's pods could not start on (an image that never pulls, GPUs another tenant
// still holds, a kubelet that never runs the pod), kept in `status.unavailableNodes`, each
// until a time: the job's plans leave them out, and the allocator does not count their free
// GPUs as the job's to grow onto, until then (DESIGN.md: "one Pending pod must not hold the
// others hostage").
//
// Guarantees: pure (the time is an input); from_status() keeps only well-formed entries that
//   have not expired at `now` (one a user edited into nonsense is dropped, never fatal); one
//   entry per node, the newest wins; to_status() round-trips what from_status() kept.
// Assumes: times are RFC 3339 (the operator's clock, kube/clock.h).
// Caveats: per job, not per cluster: the node is not cordoned, and another job (another image)
//   may still start there.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

// How long a node whose pod did not start stays out of the job's plans.
inline constexpr int kUnavailableNodeSeconds = 600;

struct UnavailableNode {
  std::string node;
  std::string reason;   // CamelCase, e.g. PodStartTimeout
  std::string message;  // which pod waited for what, for `kubectl get tj -o yaml`
  std::string until;    // RFC 3339: plans may use the node again from then
};

class UnavailableNodes {
 public:
  static UnavailableNodes from_status(const nlohmann::json& status, const std::string& now);
  nlohmann::json to_status() const;

  bool empty() const { return entries_.empty(); }
  const std::vector<UnavailableNode>& entries() const { return entries_; }
  std::set<std::string> names() const;
  // "n1 until 2026-11-24T10:10:00Z, n2 until ...", for messages.
  std::string summary() const;
  // Adds or replaces the node's entry.
  void add(UnavailableNode entry);

 private:
  std::vector<UnavailableNode> entries_;
};

}  // namespace flotilla::op
