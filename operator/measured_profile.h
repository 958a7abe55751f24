// Online profiling: the per-stage seconds a running job's sidecars report, folded into a planner
// profile of the job's model on each GPU type it runs on, so the job's next plans (the scale
// table and every rescale) are timed with what was measured instead of the catalog's guess.
//
// Guarantees: pure and deterministic. For each GPU type of the running plan:
//   ratio_fwd(type) = sum over the type's stages of the measured forward seconds per micro-batch
//                     / the same sum predicted by `predicted` (likewise backward),
//   clamped to [kMinRatio, kMaxRatio]; the profile's per-block times at the plan's (micro-batch,
//   TP) are the predicted block times times the ratios (update time kept as predicted). Stages
//   of one type share one ratio, so a type's profile covers every block, including blocks its
//   stages did not run. `signature` rounds the ratios to two significant digits: a new
//   signature means the plans would change, the same one means nothing to rebuild.
//   No answer (nullopt) unless every stage of the plan has a report of the plan's epoch with a
//   positive, finite time: half a measurement never moves a table.
// Assumes: the reports are steady-state (the caller waits some steps into the epoch); replicas
//   of one stage are averaged; times are per micro-batch of the plan's size.
// Caveats: communication stays modelled: a ratio folds the compute only. Other micro-batch
//   sizes scale linearly from the measured one (the planner's one-size profile rule).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/pod_plan.h"
#include "operator/job_plan.h"
#include "planner/profile.h"

namespace flotilla::op {

struct MeasuredRatio {
  std::string gpu_type;
  int tp = 1;           // of the type's stages in the measured plan
  double forward = 1;   // measured / predicted
  double backward = 1;
};

struct MeasuredProfile {
  std::vector<planner::GpuProfile> profiles;  // one per GPU type of the plan
  std::vector<MeasuredRatio> ratios;
  std::string signature;  // "emu-slow:f0.42,b0.40;..."
  std::string summary;    // one line for the event
};

inline constexpr double kMinMeasuredRatio = 0.02;
inline constexpr double kMaxMeasuredRatio = 50;

// The ratios alone (O(stages)): what a caller compares before it builds profiles.
std::optional<std::vector<MeasuredRatio>> measure_ratios(const planner::ModelSpec& model, const JobPlan& plan,
                                                          const std::vector<PodReport>& reports,
                                                          const planner::ComputeModel& predicted,
                                                          const planner::GpuCatalog& catalog);
// The profiles, signature and summary of ratios measured under `plan` (O(types x blocks)).
MeasuredProfile fold_ratios(const planner::ModelSpec& model, const JobPlan& plan, std::vector<MeasuredRatio> ratios,
                            const planner::ComputeModel& predicted, const planner::GpuCatalog& catalog);
// measure_ratios() then fold_ratios().
std::optional<MeasuredProfile> measure_profile(const planner::ModelSpec& model, const JobPlan& plan,
                                               const std::vector<PodReport>& reports,
                                               const planner::ComputeModel& predicted,
                                               const planner::GpuCatalog& catalog);

}  // namespace flotilla::op
