#include "simulator/availability_replay.h"

#include <algorithm>
#include <climits>

#include "scaler/arrival_rate.h"
#include "scaler/decide.h"

namespace flotilla::simulator {

// The scaler's pure core, which this shell drives.
using scaler::ArrivalRateEstimator;
using scaler::BenefitDecision;
using scaler::DecideParams;
using scaler::Decision;
using scaler::JobSnapshot;
using scaler::ScaleAction;
using scaler::ScaleEntry;
using scaler::ScaleTable;
using scaler::decide;
using scaler::estimate_restart_overhead;

const char* availability_policy_name(AvailabilityPolicy p) {
  switch (p) {
    case AvailabilityPolicy::static_start: return "static";
    case AvailabilityPolicy::greedy: return "greedy";
    case AvailabilityPolicy::flextrain: return "flextrain";
  }
  return "?";
}

std::optional<AvailabilityPolicy> parse_availability_policy(const std::string& name) {
  if (name == "static") return AvailabilityPolicy::static_start;
  if (name == "greedy") return AvailabilityPolicy::greedy;
  if (name == "flextrain") return AvailabilityPolicy::flextrain;
  return std::nullopt;
}

double entry_samples_per_s(const ScaleEntry& e, int global_batch) {
  return e.iteration_s > 0 ? global_batch / e.iteration_s : 0.0;
}

namespace {

class Replay {
 public:
  Replay(const ScaleTable& table, const AvailabilityReplayParams& p)
      : table_(table), p_(p), drops_(p.window_s, 1) {
    out_.policy = p.policy;
  }

  AvailabilityResult run(const std::vector<AvailabilityPoint>& trace) {
    if (trace.empty()) return out_;
    const double t0 = trace.front().time_s;
    // The job is already running on the best plan for the first row's GPUs (no restart).
    if (const ScaleEntry* e = table_.best_within(trace.front().gpus)) {
      hold(*e);
      log(t0, trace.front().gpus, 0, "start", 0, std::nullopt, "initial plan for the first row");
    }
    start_gpus_ = gpus_ > 0 ? gpus_ : INT_MAX;
    int previous = trace.front().gpus;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const double now = trace[i].time_s;
      const int avail = trace[i].gpus;
      // Only this row and earlier ones feed λ: a drop is known when it happens, never before.
      if (avail < previous) drops_.record(now, previous - avail);
      previous = avail;
      tick(now, avail);
      const double end = i + 1 < trace.size() ? trace[i + 1].time_s : now;
      double cur = now;
      // The end of a restart is a tick too: a gain seen mid-restart is considered then.
      for (int guard = 0; restart_until_ > cur && restart_until_ < end && guard < 1000; ++guard) {
        advance(cur, restart_until_, avail);
        cur = restart_until_;
        tick(cur, avail);
      }
      advance(cur, end, avail);
    }
    out_.duration_s = trace.back().time_s - t0;
    out_.samples_per_gpu_hour = out_.gpu_hours > 0 ? out_.samples / out_.gpu_hours : 0.0;
    return out_;
  }

 private:
  void hold(const ScaleEntry& e) {
    gpus_ = e.gpus;
    entry_ = e;
    out_.max_held_gpus = std::max(out_.max_held_gpus, gpus_);
  }

  void log(double now, int avail, int from, const std::string& action, double restart_s,
           const std::optional<BenefitDecision>& benefit, const std::string& reason) {
    out_.decisions.push_back({.time_s = now,
                              .available_gpus = avail,
                              .from_gpus = from,
                              .to_gpus = gpus_,
                              .action = action,
                              .layout = gpus_ > 0 ? entry_.config.to_string() : "",
                              .restart_s = restart_s,
                              .benefit = benefit,
                              .reason = reason});
  }

  void restart(double now, double overhead_s) {
    restart_until_ = now + std::max(0.0, overhead_s);
    ++out_.restarts;
  }

  void tick(double now, int avail) {
    const int from = gpus_;
    if (gpus_ > avail) {
      // Forced: the node-loss path of decide() (PP first under a strict table).
      JobSnapshot snap;
      snap.current_gpus = gpus_;
      snap.gpus_alive = avail;
      snap.checkpoint_bytes = p_.checkpoint_bytes;
      snap.measured_restart_s = p_.restart_s;
      DecideParams dp;
      dp.overhead = p_.overhead;
      const Decision d = decide(table_, snap, dp);
      if (d.action == ScaleAction::shrink && d.target) {
        hold(*d.target);
        restart(now, d.overhead_s);
        log(now, avail, from, "shrink", d.overhead_s, std::nullopt, d.reason);
      } else {
        gpus_ = 0;
        restart_until_ = now;
        log(now, avail, from, "stop", 0, std::nullopt, d.reason);
      }
    } else if (gpus_ == 0) {
      // The restart is paid whatever the size, so greedy and flextrain take all that is free;
      // static never grows past the allocation it first ran on.
      const int limit =
          p_.policy == AvailabilityPolicy::static_start ? std::min(avail, start_gpus_) : avail;
      if (const ScaleEntry* e = table_.best_within(limit)) {
        const double o = estimate_restart_overhead(p_.checkpoint_bytes, 0, e->gpus, p_.restart_s,
                                                   p_.overhead)
                             .total_s();
        hold(*e);
        if (start_gpus_ == INT_MAX) start_gpus_ = gpus_;  // it could not run at the first row
        restart(now, o);
        log(now, avail, from, "start", o, std::nullopt,
            "a layout fits again on " + std::to_string(limit) + " GPUs");
      }
    } else if (avail > gpus_ && now >= restart_until_ &&
               p_.policy != AvailabilityPolicy::static_start) {
      JobSnapshot snap;
      snap.current_gpus = gpus_;
      snap.free_gpus = avail - gpus_;
      snap.arrival_rate_per_s = drops_.rate_per_s(now);
      snap.checkpoint_bytes = p_.checkpoint_bytes;
      snap.measured_restart_s = p_.restart_s;
      DecideParams dp;
      dp.benefit = p_.benefit;
      dp.overhead = p_.overhead;
      dp.use_benefit_check = p_.policy == AvailabilityPolicy::flextrain;
      const Decision d = decide(table_, snap, dp);
      if (d.action == ScaleAction::scale_up && d.target) {
        if (dp.use_benefit_check) ++out_.benefit_checks_passed;
        hold(*d.target);
        restart(now, d.overhead_s);
        log(now, avail, from, "scale-up", d.overhead_s, d.benefit, d.reason);
      } else if (d.benefit && !d.benefit->scale_up && dp.use_benefit_check) {
        ++out_.benefit_checks_refused;
        log(now, avail, from, "refused", 0, d.benefit, d.reason);
      }
    }
    if (gpus_ > avail)
      out_.violations.push_back("t=" + std::to_string(now) + " s: holds " + std::to_string(gpus_) +
                                " GPUs, " + std::to_string(avail) + " available");
  }

  void advance(double from, double to, int avail) {
    if (!(to > from)) return;
    const double dt = to - from;
    out_.available_gpu_hours += avail * dt / 3600.0;
    if (gpus_ <= 0) return;
    out_.gpu_hours += gpus_ * dt / 3600.0;
    const double restarting = std::clamp(restart_until_ - from, 0.0, dt);
    out_.restart_time_s += restarting;
    out_.samples += entry_samples_per_s(entry_, p_.global_batch) * (dt - restarting);
  }

  const ScaleTable& table_;
  AvailabilityReplayParams p_;
  ArrivalRateEstimator drops_;
  AvailabilityResult out_;
  int gpus_ = 0;
  ScaleEntry entry_;
  int start_gpus_ = INT_MAX;
  double restart_until_ = -1e300;
};

}  // namespace

AvailabilityResult replay_availability(const std::vector<AvailabilityPoint>& trace,
                                       const ScaleTable& table,
                                       const AvailabilityReplayParams& params) {
  return Replay(table, params).run(trace);
}

}  // namespace flotilla::simulator
