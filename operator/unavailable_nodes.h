// The nodes a job's pods could not start on (an image that never pulls, GPUs another tenant
// still holds, a kubelet that never runs the pod), kept in `status.unavailableNodes`, each
// until a time: the job's plans leave them out, and the allocator does not count their free
// GPUs as the job's to grow onto, until then (DESIGN.md: "one Pending pod must not hold the
// others hostage").
//
// Guarantees: pure (the time is an input). A node left behind again within kRememberSeconds of
//   its last wait's end stays out twice as long as the time before (10, 20, 40 min, ... at most
//   kMaxUnavailableSeconds), so a node that can never start the job's pods costs a relaunch
//   ever more rarely instead of every 20 minutes. from_status() keeps only well-formed entries
//   still in force or remembered at `now` (one a user edited into nonsense is dropped, never
//   fatal); one entry per node; to_status() round-trips what from_status() kept, leaving out
//   empty optional fields.
// Assumes: times are RFC 3339 (the operator's clock, kube/clock.h).
// Caveats: per job, not per cluster: the node is not cordoned, and another job (another image)
//   may still start there.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

// How long a node whose pod did not start stays out of the job's plans the first time.
inline constexpr int kUnavailableNodeSeconds = 600;
inline constexpr int kMaxUnavailableSeconds = 8 * kUnavailableNodeSeconds;
// How long after its wait ended an entry is remembered, for the doubling.
inline constexpr int kRememberSeconds = 3600;

struct UnavailableNode {
  std::string node;
  std::string reason;   // CamelCase, e.g. PodStartTimeout
  std::string message;  // which pod waited for what, for `kubectl get tj -o yaml`
  std::string until;    // RFC 3339: plans may use the node again from then
  int times = 1;        // how often the job's pods did not start there in a row
};

class UnavailableNodes {
 public:
  static UnavailableNodes from_status(const nlohmann::json& status, const std::string& now);
  nlohmann::json to_status() const;

  bool empty() const { return entries_.empty(); }
  const std::vector<UnavailableNode>& entries() const { return entries_; }
  // The nodes still out of the job's plans at `now` (remembered ones are not).
  std::set<std::string> names() const;
  // "n1 until 2026-11-24T10:10:00Z, ...": the nodes names() gives, for messages.
  std::string summary() const;
  // Leaves `node` out from now on: for kUnavailableNodeSeconds, or twice its previous wait if it
  // is still remembered. Returns the entry written.
  const UnavailableNode& leave_out(const std::string& node, const std::string& reason, const std::string& message);

 private:
  bool in_force(const UnavailableNode& e) const;
  std::string now_;
  std::vector<UnavailableNode> entries_;
};

}  // namespace flotilla::op
