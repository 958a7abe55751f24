// The cluster-wide allocator pass (FlexTrain §5, over many jobs): from one snapshot of every
// job and the free GPUs, the GPU count each job should hold next, with the reason.
//
// Order of work, each step seeing what the earlier ones took:
//   1. lost GPUs: a running job whose GPUs died shrinks to its best table entry on what is left
//      (PP first under strict: the table only holds PP changes), or goes back to the queue;
//   2. admission, FIFO by priority (higher first), then arrival: a waiting job is admitted at
//      its initial size when that many GPUs of its allowed types are free; otherwise the extra
//      GPUs of elastic jobs of no higher priority are reclaimed for it (plan_preemption, §5.2:
//      most-benefited first, never below their initial size) when that makes enough, else it
//      waits and, being first in line, blocks scale-ups (later jobs may still backfill);
//   3. scale-up, only while nobody waits: each running elastic job (fewest GPUs first) takes
//      the best entry within the free GPUs if the Poisson benefit check passes (§5.1), the job
//      has longer left to train than that check's break-even S/(S-1)·T_overhead (a job that
//      finishes sooner would end later for the restart: T_o + R/S > R; reason code
//      EndsBeforeRestartRepays, the check's inputs kept as it answered), and its last rescale
//      is at least its minimum interval ago.
// Guarantees: pure and deterministic (no clock: ages are inputs); every job gets exactly one
//   decision; no GPU is handed out twice within a pass; a decision that considered a scale-up
//   carries the benefit check's inputs (λ, S, T_overhead, probability).
// Assumes: a job's table covers its GPU counts (scale_table.h); free GPUs are per GPU type,
//   and a job may use any of its allowed types (the per-job planner chooses the exact mix).
// Caveats: a job's unusable GPUs (unusable_free_gpus_by_type) are subtracted per type from the
//   free pool it sees, so it is offered at most the free GPUs beyond them (conservative when
//   another job took GPUs of that type earlier in the pass).
//   Type-blind within a job's allowed set: a job admitted on "6 free GPUs of A100 or
//   V100" may still fail to place a plan on them (the reconcile then reports it and the job
//   waits for the next pass).
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scaler/benefit_check.h"
#include "scaler/scale_table.h"

namespace flotilla::scaler {

struct AllocatorJob {
  std::string key;
  int priority = 0;
  std::int64_t arrival_order = 0;  // smaller arrived first
  bool elastic = true;             // false: never resized (elasticity off)
  bool running = false;            // holds GPUs now
  int current_gpus = 0;
  int gpus_alive = -1;                 // of current_gpus, on healthy nodes; -1: all
  int initial_gpus = 0;                // admission size; 0: fits nowhere (waits, never admitted)
  std::string fits_nowhere_why;        // with initial_gpus 0: the planner's line, for the user
  std::string fits_nowhere_reason;     // with initial_gpus 0: its reason code; "" = FitsNowhere
  const ScaleTable* table = nullptr;   // not owned; null: no resizing possible
  std::vector<std::string> gpu_types;  // allowed; empty: any
  // Free GPUs by type this job must not be given (nodes its pods could not start on,
  // operator/unavailable_nodes.h): another job may take them, this one is never admitted or
  // grown onto them.
  std::map<std::string, int> unusable_free_gpus_by_type;
  // false: offered no scale-up (its last one planned to the plan it runs, and neither its plan
  // nor the free GPUs changed since: operator status.declinedScaleUp), so the free GPUs go to
  // other jobs' scale-ups.
  bool may_grow = true;
  double overhead_s = 30;              // restart overhead of a rescale
  double seconds_since_rescale = std::numeric_limits<double>::infinity();
  double min_rescale_interval_s = 0;
  double benefit_threshold = 0.6;
  // λ over this job's own window (spec.elasticity.windowSeconds); unset: the input's λ.
  std::optional<double> arrival_rate_per_s;
  // Seconds of training left at its current speed; unset: unknown, taken as long.
  std::optional<double> remaining_s;
};

struct AllocatorInput {
  std::vector<AllocatorJob> jobs;
  std::map<std::string, int> free_gpus_by_type;  // GPUs nobody holds, on healthy nodes
  double arrival_rate_per_s = 0;                 // λ over the benefit-check window
  bool use_benefit_check = true;                 // false: greedy (the baseline)
  bool allow_preemption = true;                  // false: a waiting job never reclaims GPUs (§5.2 off)
};

enum class AllocAction { kWait, kAdmit, kKeep, kGrow, kShrink, kRequeue };
const char* to_string(AllocAction action);

struct AllocatorDecision {
  std::string key;
  AllocAction action = AllocAction::kKeep;
  int target_gpus = 0;      // GPUs the job should hold after this pass (0: none)
  std::string reason;       // one line for status, events and metrics
  std::string reason_code;  // short CamelCase for conditions and metric labels
  std::optional<BenefitDecision> benefit;
  int queue_position = 0;  // kWait: 1 = next in line
};

std::vector<AllocatorDecision> allocate(const AllocatorInput& input);

}  // namespace flotilla::scaler
