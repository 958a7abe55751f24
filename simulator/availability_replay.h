// One training job on a GPU pool whose size follows an availability trace (Sailor's A100
// availability traces): the replay where FlexTrain's Poisson benefit check (§5.1) matters.
//
// Model (docs/simulator.md, "Availability replay"):
//   - the trace is a step function: `gpus` GPUs are free to the job from `time_s` until the next
//     row; the replay ends at the last row's time. Every row is a controller tick (FlexTrain's
//     controller checks periodically; Sailor's traces are sampled every 63 s), and so is the end
//     of every restart.
//   - the job runs the table entry it holds; throughput = global_batch / iteration_s of that
//     entry (samples per second); it holds its GPUs also while restarting, without progress.
//   - a drop below the GPUs the job holds forces a shrink through decide() (the node-loss path:
//     best feasible entry on what is left, PP first under strict tables); nothing fits → it
//     stops and waits. Every policy pays a restart for it. A stopped job (or one that could not
//     run at the first row) starts, paying a restart, at the first tick where a layout fits:
//     greedy and flextrain on the best entry within all free GPUs (the restart is paid anyway,
//     so no benefit check), static within min(free, the GPUs it first ran on).
//   - a gain is an opportunity, at the first tick where the job is not restarting:
//       static    never grows (a stopped job restarts at most at the size it first ran on);
//       greedy    decide() without the benefit check: re-plans onto the best entry within all
//                 free GPUs whenever that is faster, and restarts;
//       flextrain decide() with the check, λ = drops of availability in the past window
//                 (ArrivalRateEstimator over the rows seen so far, never a later row).
//   - restart cost: `restart_s` when given (a measured restart), else estimate_restart_overhead
//     (checkpoint save + load + init) for that transition, as decide() computes it.
// Guarantees: pure and deterministic; held GPUs <= available GPUs at every instant (a violation
//   would be listed, never hidden); every decision that changes the allocation and every refused
//   benefit check is logged with its inputs; GPU-hours count held GPUs (restarts included).
// Assumes: rows in non-decreasing time order (load_availability_trace checks); the table's
//   entries are the layouts the job may run (build_availability_table gives one per count).
// Caveats: the job starts on the best entry within the first row at no cost; a restart that a
//   later drop interrupts is charged only up to that drop, and the new restart starts then.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scaler/benefit_check.h"
#include "scaler/restart_overhead.h"
#include "scaler/scale_table.h"

namespace flotilla::simulator {

struct AvailabilityPoint {
  double time_s = 0;
  int gpus = 0;
};

enum class AvailabilityPolicy { static_start, greedy, flextrain };
const char* availability_policy_name(AvailabilityPolicy p);
std::optional<AvailabilityPolicy> parse_availability_policy(const std::string& name);

struct AvailabilityReplayParams {
  AvailabilityPolicy policy = AvailabilityPolicy::flextrain;
  std::optional<double> restart_s;  // measured restart time; nullopt: the estimate
  scaler::RestartOverheadParams overhead;   // for the estimate (gpus_per_node matters)
  double checkpoint_bytes = 0;      // for the estimate
  scaler::BenefitCheckParams benefit;       // P_th
  double window_s = 3600;           // λ window over past availability drops
  int global_batch = 1;             // samples per iteration
};

struct AvailabilityDecision {
  double time_s = 0;
  int available_gpus = 0;
  int from_gpus = 0;
  int to_gpus = 0;
  std::string action;  // "shrink", "stop", "scale-up", "start", "refused"
  std::string layout;  // the target's dp/pp/tp/cp
  double restart_s = 0;
  std::optional<scaler::BenefitDecision> benefit;  // λ, S, T_overhead, P(idle long enough)
  std::string reason;
};

struct AvailabilityResult {
  AvailabilityPolicy policy = AvailabilityPolicy::flextrain;
  double duration_s = 0;
  double samples = 0;
  double gpu_hours = 0;      // held GPUs x time, restarts included
  double samples_per_gpu_hour = 0;
  double available_gpu_hours = 0;  // the trace's GPUs x time
  int restarts = 0;
  double restart_time_s = 0;       // time spent restarting (truncated at the end)
  int benefit_checks_passed = 0;
  int benefit_checks_refused = 0;
  int max_held_gpus = 0;
  std::vector<AvailabilityDecision> decisions;
  std::vector<std::string> violations;  // held > available at some instant; empty when sound
};

AvailabilityResult replay_availability(const std::vector<AvailabilityPoint>& trace,
                                       const scaler::ScaleTable& table,
                                       const AvailabilityReplayParams& params);

// Samples per second of an entry: global_batch / iteration_s.
double entry_samples_per_s(const scaler::ScaleEntry& e, int global_batch);

}  // namespace flotilla::simulator
