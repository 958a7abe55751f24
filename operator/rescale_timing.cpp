#include "operator/rescale_timing.h"

#include <algorithm>

#include "kube/clock.h"
#include "operator/job_plan.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

// Seconds since the epoch of status.lastRescaleTime; 0 when absent or unreadable.
double rescale_started_s(const Json& status) {
  if (!status.is_object()) return 0;
  return kube::rfc3339_seconds(status.value("lastRescaleTime", "")).value_or(0);
}

std::int64_t plan_field(const Json& status, const char* field) { return plan_integer(status, field).value_or(-1); }

}  // namespace

RescaleTiming time_rescale(const Json& before, const Json& after, double now_s, double lifted_at_s) {
  RescaleTiming t;
  const std::string phase_before = before.is_object() ? before.value("phase", "") : "";
  const std::string phase_after = after.is_object() ? after.value("phase", "") : "";
  if (phase_before != "Rescaling") return t;
  const double started = rescale_started_s(after);
  const std::int64_t epoch = plan_field(after, "epoch");
  const bool lifted_now = plan_field(before, "epoch") == epoch && plan_field(before, "barrier") < epoch &&
                          plan_field(after, "barrier") == epoch;
  if (lifted_now) {
    t.barrier_lifted = true;
    lifted_at_s = now_s;
    if (started > 0) t.observations.emplace_back("drain", std::max(0.0, now_s - started));
  }
  if (phase_after == "Running") {
    if (lifted_at_s > 0) t.observations.emplace_back("restart", std::max(0.0, now_s - lifted_at_s));
    if (started > 0) t.observations.emplace_back("total", std::max(0.0, now_s - started));
  }
  return t;
}

double rescaling_age_seconds(const Json& status, double now_s) {
  if (!status.is_object() || status.value("phase", "") != "Rescaling") return 0;
  const double started = rescale_started_s(status);
  return started > 0 ? std::max(0.0, now_s - started) : 0;
}

}  // namespace flotilla::op
