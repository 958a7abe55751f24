#include "kube/leader_election.h"

#include <random>
#include <stdexcept>
#include <thread>

namespace flotilla::kube {

static std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

std::string validate(const LeaderElectionConfig& c) {
  using std::chrono::milliseconds;
  if (c.lease_duration <= milliseconds(0)) return "lease_duration must be positive";
  if (c.renew_deadline <= milliseconds(0)) return "renew_deadline must be positive";
  if (c.retry_period <= milliseconds(0)) return "retry_period must be positive";
  if (c.lease_duration <= c.renew_deadline)
    return "lease_duration (" + ms(c.lease_duration) + ") must be greater than renew_deadline (" +
           ms(c.renew_deadline) + ")";
  if (static_cast<double>(c.renew_deadline.count()) <=
      kLeaderElectionJitterFactor * static_cast<double>(c.retry_period.count()))
    return "renew_deadline (" + ms(c.renew_deadline) + ") must be greater than retry_period (" +
           ms(c.retry_period) + ") * 1.2";
  if (c.identity.empty()) return "identity must be set (e.g. the pod name)";
  if (c.lease_name.empty()) return "lease_name must be set";
  if (!c.on_started_leading || !c.on_stopped_leading)
    return "on_started_leading and on_stopped_leading callbacks must be set";
  return "";
}

LeaseRecord lease_record_from(const Json& lease) {
  LeaseRecord r;
  if (!lease.is_object() || !lease.contains("spec") || !lease["spec"].is_object()) return r;
  const auto& spec = lease["spec"];
  r.holder_identity = spec.value("holderIdentity", "");
  r.lease_duration_seconds = spec.value("leaseDurationSeconds", 0);
  r.acquire_time = spec.value("acquireTime", "");
  r.renew_time = spec.value("renewTime", "");
  r.lease_transitions = spec.value("leaseTransitions", 0);
  return r;
}

Json lease_spec_json(const LeaseRecord& r) {
  Json spec = {{"holderIdentity", r.holder_identity},
               {"leaseDurationSeconds", r.lease_duration_seconds},
               {"leaseTransitions", r.lease_transitions}};
  if (!r.acquire_time.empty()) spec["acquireTime"] = r.acquire_time;
  if (!r.renew_time.empty()) spec["renewTime"] = r.renew_time;
  return spec;
}

LeaseDecision decide_lease(const std::optional<LeaseRecord>& observed, Clock::time_point observed_at,
                           Clock::time_point now, Clock::wall_time_point wall_now,
                           const std::string& identity, std::chrono::milliseconds lease_duration) {
  LeaseDecision d;
  const std::string stamp = format_rfc3339_micro(wall_now);
  const int duration_s = static_cast<int>((lease_duration.count() + 999) / 1000);
  if (!observed) {
    d.acquire = true;
    d.record = {identity, duration_s, stamp, stamp, 0};
    return d;
  }
  const bool held_by_other = !observed->holder_identity.empty() && observed->holder_identity != identity;
  if (held_by_other && observed_at + lease_duration > now) {
    d.reason = "lease held by " + observed->holder_identity + " and not yet expired";
    return d;
  }
  d.acquire = true;
  d.record = *observed;
  d.record.lease_duration_seconds = duration_s;
  d.record.renew_time = stamp;
  if (observed->holder_identity != identity) {
    d.record.holder_identity = identity;
    d.record.acquire_time = stamp;
    d.record.lease_transitions = observed->lease_transitions + 1;
  }
  return d;
}

LeaderElector::LeaderElector(std::shared_ptr<Client> client, LeaderElectionConfig config,
                             std::shared_ptr<const Clock> clock)
    : client_(std::move(client)), config_(std::move(config)), clock_(std::move(clock)),
      rng_state_(std::random_device{}()) {
  if (auto problem = validate(config_); !problem.empty())
    throw std::invalid_argument("leader election: " + problem);
}

std::string LeaderElector::observed_leader() const {
  std::lock_guard lock(mu_);
  return reported_leader_;
}

Clock::duration LeaderElector::jittered_retry() {
  std::mt19937_64 rng(rng_state_++);
  double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  auto extra = std::chrono::duration<double, std::milli>(
      (kLeaderElectionJitterFactor - 1.0) * u * static_cast<double>(config_.retry_period.count()));
  return config_.retry_period + std::chrono::duration_cast<Clock::duration>(extra);
}

bool LeaderElector::try_acquire_or_renew() {
  const auto& ns = config_.lease_namespace;
  auto got = client_->get(resources::leases, ns, config_.lease_name);
  std::optional<LeaseRecord> record;
  if (got) {
    record = lease_record_from(*got);
    if (!observed_ || !(*observed_ == *record)) {
      observed_ = record;
      observed_at_ = clock_->now();
    }
    observed_rv_ = object_resource_version(*got);
  } else if (!got.is(ErrorKind::NotFound)) {
    return false;
  }
  if (record && !record->holder_identity.empty()) {
    std::function<void(const std::string&)> notify;
    {
      std::lock_guard lock(mu_);
      if (reported_leader_ != record->holder_identity) {
        reported_leader_ = record->holder_identity;
        notify = config_.on_new_leader;
      }
    }
    if (notify) notify(record->holder_identity);
  }
  auto decision = decide_lease(record, observed_at_, clock_->now(), clock_->wall_now(),
                               config_.identity, config_.lease_duration);
  if (!decision.acquire) return false;
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", config_.lease_name}, {"namespace", ns}}},
                {"spec", lease_spec_json(decision.record)}};
  Result<Json> written = Error{};
  if (!record) {
    written = client_->create(resources::leases, ns, lease);
  } else {
    lease["metadata"]["resourceVersion"] = observed_rv_;
    written = client_->update(resources::leases, ns, lease);
  }
  if (!written) return false;  // Conflict: someone else wrote first; re-read next round
  observed_ = decision.record;
  observed_at_ = clock_->now();
  observed_rv_ = object_resource_version(*written);
  return true;
}

void LeaderElector::release() {
  if (!observed_ || observed_->holder_identity != config_.identity) return;
  LeaseRecord released = *observed_;
  released.holder_identity = "";
  released.lease_duration_seconds = 1;
  released.renew_time = format_rfc3339_micro(clock_->wall_now());
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata",
                 {{"name", config_.lease_name},
                  {"namespace", config_.lease_namespace},
                  {"resourceVersion", observed_rv_}}},
                {"spec", lease_spec_json(released)}};
  (void)client_->update(resources::leases, config_.lease_namespace, lease);
}

void LeaderElector::run(std::stop_token stop) {
  // Campaign.
  while (!stop.stop_requested()) {
    if (try_acquire_or_renew()) break;
    clock_->sleep_for(jittered_retry(), stop);
  }
  if (stop.stop_requested()) return;
  leading_ = true;
  {
    std::lock_guard lock(mu_);
    reported_leader_ = config_.identity;
  }
  if (config_.on_new_leader) config_.on_new_leader(config_.identity);
  std::jthread work([this](std::stop_token leading) { config_.on_started_leading(leading); });

  // Renew until we cannot for renew_deadline, or until asked to stop.
  auto last_renew = clock_->now();
  while (!stop.stop_requested()) {
    if (!clock_->sleep_for(config_.retry_period, stop)) break;
    if (try_acquire_or_renew()) {
      last_renew = clock_->now();
    } else if (clock_->now() - last_renew >= config_.renew_deadline) {
      break;
    }
  }
  leading_ = false;
  work.request_stop();
  if (stop.stop_requested() && config_.release_on_cancel) release();
  config_.on_stopped_leading();
}

}  // namespace flotilla::kube
