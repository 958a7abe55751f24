#include "operator/measured_profile.h"

#include "common/significant_digits.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace flotilla::op {
namespace {

struct Sums {
  double measured_forward = 0, measured_backward = 0;
  double predicted_forward = 0, predicted_backward = 0;
};

// Two significant digits, so noise below a few percent keeps the signature.
std::string rounded(double x) { return significant_digits_text(x, 2); }

double clamped(double measured, double predicted) {
  return std::clamp(measured / predicted, kMinMeasuredRatio, kMaxMeasuredRatio);
}

// Mean measured (forward, backward) seconds per micro-batch of each stage, over the reports of
// the plan's epoch; nullopt when a stage has none or a time is not positive and finite.
std::optional<std::vector<std::pair<double, double>>> stage_means(const JobPlan& plan,
                                                                   const std::vector<PodReport>& reports) {
  std::vector<std::pair<double, double>> sum(plan.stages.size(), {0, 0});
  std::vector<int> count(plan.stages.size(), 0);
  for (const PodReport& r : reports) {
    if (r.epoch != plan.epoch) continue;
    for (const StageSeconds& s : r.stage_seconds) {
      if (s.stage < 0 || s.stage >= static_cast<int>(plan.stages.size())) continue;
      if (!(std::isfinite(s.forward_s) && s.forward_s > 0 && std::isfinite(s.backward_s) && s.backward_s > 0))
        return std::nullopt;
      sum[s.stage].first += s.forward_s;
      sum[s.stage].second += s.backward_s;
      ++count[s.stage];
    }
  }
  for (std::size_t i = 0; i < sum.size(); ++i) {
    if (count[i] == 0) return std::nullopt;
    sum[i].first /= count[i];
    sum[i].second /= count[i];
  }
  return sum;
}

}  // namespace

std::optional<std::vector<MeasuredRatio>> measure_ratios(const planner::ModelSpec& model, const JobPlan& plan,
                                                          const std::vector<PodReport>& reports,
                                                          const planner::ComputeModel& predicted,
                                                          const planner::GpuCatalog& catalog) {
  if (plan.stages.empty()) return std::nullopt;
  const auto measured = stage_means(plan, reports);
  if (!measured) return std::nullopt;
  std::map<std::string, Sums> by_type;
  std::map<std::string, int> tp_of_type;
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const PlanStage& stage = plan.stages[i];
    const planner::GpuType* gpu = catalog.find(stage.gpu_type);
    if (gpu == nullptr) return std::nullopt;
    const planner::LayerTimes p = predicted.stage_times(model, *gpu, stage.first_block, stage.last_block + 1, stage.tp,
                                                        plan.micro_batch_size);
    if (!(p.forward_s > 0 && p.backward_s > 0)) return std::nullopt;
    Sums& s = by_type[gpu->name];
    s.measured_forward += (*measured)[i].first;
    s.measured_backward += (*measured)[i].second;
    s.predicted_forward += p.forward_s;
    s.predicted_backward += p.backward_s;
    tp_of_type[gpu->name] = stage.tp;
  }
  std::vector<MeasuredRatio> ratios;
  for (const auto& [type, s] : by_type)
    ratios.push_back({type, tp_of_type[type], clamped(s.measured_forward, s.predicted_forward),
                      clamped(s.measured_backward, s.predicted_backward)});
  return ratios;
}

MeasuredProfile fold_ratios(const planner::ModelSpec& model, const JobPlan& plan, std::vector<MeasuredRatio> ratios,
                            const planner::ComputeModel& predicted, const planner::GpuCatalog& catalog) {
  MeasuredProfile out;
  for (const MeasuredRatio& ratio : ratios) {
    const planner::GpuType& gpu = *catalog.find(ratio.gpu_type);
    planner::GpuProfile profile;
    profile.model = model.name;
    profile.gpu = ratio.gpu_type;
    std::vector<planner::LayerTimes>& blocks = profile.by_mbs_tp[plan.micro_batch_size][ratio.tp];
    for (int b = 0; b < model.num_blocks(); ++b) {
      planner::LayerTimes t = predicted.block_times(model, gpu, b, ratio.tp, plan.micro_batch_size);
      t.forward_s *= ratio.forward;
      t.backward_s *= ratio.backward;
      blocks.push_back(t);
    }
    out.profiles.push_back(std::move(profile));
    out.signature += (out.signature.empty() ? "" : ";") + ratio.gpu_type + ":f" + rounded(ratio.forward) + ",b" +
                     rounded(ratio.backward);
    out.summary += std::string(out.summary.empty() ? "" : "; ") + ratio.gpu_type + " forward x" +
                   rounded(ratio.forward) + ", backward x" + rounded(ratio.backward);
  }
  out.summary = "measured/predicted compute under epoch " + std::to_string(plan.epoch) + ": " + out.summary;
  out.ratios = std::move(ratios);
  return out;
}

std::optional<MeasuredProfile> measure_profile(const planner::ModelSpec& model, const JobPlan& plan,
                                               const std::vector<PodReport>& reports,
                                               const planner::ComputeModel& predicted,
                                               const planner::GpuCatalog& catalog) {
  auto ratios = measure_ratios(model, plan, reports, predicted, catalog);
  if (!ratios) return std::nullopt;
  return fold_ratios(model, plan, std::move(*ratios), predicted, catalog);
}

}  // namespace flotilla::op
