#include "simulator/sim_job_models.h"

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"
#include "scaler/elastic_model.h"
#include "scaler/planner_predictor.h"

namespace flotilla::simulator {

// The scaler's pure core, which this shell drives.
using scaler::PlannerJob;
using scaler::ScaleEntry;
using scaler::ScaleTableParams;
using scaler::build_scale_table;
using scaler::make_planner_predictor;
using scaler::model_for_trace_job;

std::optional<JobModelSource> parse_job_model_source(const std::string& name) {
  if (name == "auto") return JobModelSource::automatic;
  if (name == "table2") return JobModelSource::table2;
  if (name == "planner") return JobModelSource::planner;
  return std::nullopt;
}

std::vector<PlannerBand> default_planner_bands(int min_gpus) {
  return {{min_gpus, "GPT-Neo-2.7B", 8, 1, 256, false},
          {64, "Llama-2-7B", 8, 1, 256, true},
          {256, "Llama-2-13B", 8, 1, 256, true}};
}

SimJobModelResult table2_job_model(int gpus, int min_gpus, const ScaleTableParams& params) {
  SimJobModelResult out;
  const auto model = model_for_trace_job(gpus, min_gpus);
  if (!model) {
    out.why = "no Table-2 layout for " + std::to_string(gpus) + " GPUs";
    return out;
  }
  auto built = build_scale_table(*model, params);
  if (!built.table) {
    out.why = built.error;
    return out;
  }
  const ScaleEntry* initial = built.table->find(model->initial.gpus());
  out.model = SimJobModel{model->name, "", model->checkpoint_bytes,
                          initial ? initial->iteration_s : 0.0, std::move(*built.table)};
  return out;
}

std::string planner_gpu_name(const std::string& cluster_gpu_type) {
  static const planner::GpuCatalog catalog = planner::builtin_gpu_catalog();
  std::string name = cluster_gpu_type;
  if (name == "V100M16") name = "V100-16";
  if (name == "V100M32") name = "V100-32";
  const planner::GpuType* g = catalog.find(name);
  return g ? g->name : std::string();
}

SimJobModelResult planner_job_model(int gpus, const std::string& gpu_type,
                                    const std::vector<PlannerBand>& bands,
                                    const ScaleTableParams& params) {
  SimJobModelResult out;
  const PlannerBand* band = nullptr;
  for (const auto& b : bands)
    if (gpus >= b.min_gpus && (!band || b.min_gpus >= band->min_gpus)) band = &b;
  if (!band) {
    out.why = std::to_string(gpus) + " GPUs is below every model band";
    return out;
  }
  const int unit = band->dp * band->tp;
  if (unit <= 0 || gpus % unit != 0) {
    out.why = std::to_string(gpus) + " GPUs is not a multiple of DP x TP = " + std::to_string(unit);
    return out;
  }
  const std::string catalog_name = planner_gpu_name(gpu_type);
  if (catalog_name.empty()) {
    out.why = "GPU type '" + gpu_type + "' is not in the planner's catalog";
    return out;
  }
  const auto spec = planner::find_preset(band->preset);
  if (!spec) {
    out.why = "unknown planner preset '" + band->preset + "'";
    return out;
  }
  PlannerJob job;
  job.model = *spec;
  job.gpu_type = catalog_name;
  job.global_batch = band->global_batch;
  job.initial = {band->dp, gpus / unit, band->tp, 1};
  job.options.precision = planner::Precision::kBf16Mixed;
  job.options.zero_stage = 1;
  if (band->full_recompute) job.options.recompute = planner::Recompute::kFull;
  const auto predictor = make_planner_predictor(job);
  if (!predictor.error.empty()) {
    out.why = predictor.error;
    return out;
  }
  auto built = build_scale_table(predictor.elastic_model, params, predictor.predictor);
  if (!built.table) {
    out.why = built.error;
    return out;
  }
  const ScaleEntry* initial = built.table->find(gpus);
  if (!initial || !(initial->iteration_s > 0)) {
    out.why = "no initial entry in the scale table";
    return out;
  }
  out.model = SimJobModel{spec->name, gpu_type, predictor.elastic_model.checkpoint_bytes,
                          initial->iteration_s, std::move(*built.table)};
  return out;
}

}  // namespace flotilla::simulator
