#pragma once
// kube::LeaderElector — leader election through a coordination.k8s.io/v1 Lease, with
// client-go's leaderelection contract.
//
// Timing rules (checked by validate(); the constructor throws std::invalid_argument with the
// same one-line message, as client-go's NewLeaderElector returns an error):
//   lease_duration > renew_deadline > retry_period * 1.2 (the jitter factor) > 0, identity set.
// Behaviour:
// - Candidates poll the Lease every retry_period (jittered up to +20%). A Lease held by someone
//   else is taken over only after its record has not changed for lease_duration, timed on the
//   candidate's own clock from when it saw the last change (no cross-machine clock comparison).
//   So after the leader dies, a candidate takes over within lease_duration plus up to two
//   polling periods.
// - The leader renews every retry_period; when it cannot renew for renew_deadline it stops
//   leading: the leading callback's stop_token fires, then on_stopped_leading runs (a process
//   typically exits there, so two leaders never act at once: renew_deadline < lease_duration).
// - Writes use the Lease's resourceVersion: two candidates racing get one success, one Conflict.
// - On stop while leading, with release_on_cancel, the Lease is released (holder cleared) so a
//   successor need not wait lease_duration.
// Pure part: decide_lease() — what a candidate does with the record it read.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "kube/client.h"
#include "kube/clock.h"

namespace flotilla::kube {

struct LeaderElectionConfig {
  std::string lease_namespace = "default";
  std::string lease_name;
  std::string identity;
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
  bool release_on_cancel = true;
  // Runs on its own thread while this process leads; must return once `stop` fires.
  std::function<void(std::stop_token stop)> on_started_leading;
  std::function<void()> on_stopped_leading;                    // after losing or releasing
  std::function<void(const std::string& identity)> on_new_leader;  // optional
};

inline constexpr double kLeaderElectionJitterFactor = 1.2;

// "" when valid; otherwise one line saying which rule is broken and by which values.
std::string validate(const LeaderElectionConfig& config);

struct LeaseRecord {
  std::string holder_identity;
  int lease_duration_seconds = 0;
  std::string acquire_time;  // RFC 3339 micro
  std::string renew_time;
  int lease_transitions = 0;
  bool operator==(const LeaseRecord&) const = default;
};
LeaseRecord lease_record_from(const Json& lease);
Json lease_spec_json(const LeaseRecord& record);

struct LeaseDecision {
  bool acquire = false;     // write `record` (create or update)
  LeaseRecord record;       // the record to write when acquire
  std::string reason;       // why not, for logs
};
// observed: the record as last read; observed_at: when (this candidate's clock) it last changed.
LeaseDecision decide_lease(const std::optional<LeaseRecord>& observed, Clock::time_point observed_at,
                           Clock::time_point now, Clock::wall_time_point wall_now,
                           const std::string& identity, std::chrono::milliseconds lease_duration);

class LeaderElector {
 public:
  LeaderElector(std::shared_ptr<Client> client, LeaderElectionConfig config,
                std::shared_ptr<const Clock> clock = real_clock());
  // Blocks: campaigns, leads, and returns once leadership is lost or `stop` is requested.
  void run(std::stop_token stop);
  bool is_leader() const { return leading_.load(); }
  std::string observed_leader() const;

 private:
  bool try_acquire_or_renew();
  void release();
  Clock::duration jittered_retry();

  std::shared_ptr<Client> client_;
  LeaderElectionConfig config_;
  std::shared_ptr<const Clock> clock_;
  std::optional<LeaseRecord> observed_;
  std::string observed_rv_;
  Clock::time_point observed_at_;
  std::atomic<bool> leading_{false};
  mutable std::mutex mu_;
  std::string reported_leader_;
  uint64_t rng_state_;
};

}  // namespace flotilla::kube
