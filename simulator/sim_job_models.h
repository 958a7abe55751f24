// Which training job a trace job becomes in the simulator, and its scale table per GPU type.
//
// Two sources:
//   table2   FlexTrain Table-2 MoE presets by GPU band with the scaler's own cost model
//            (scaler/elastic_model.h). The planner models neither MoE nor context parallelism, so
//            these tables do not depend on the GPU type: one table serves every type.
//   planner  dense planner presets by GPU band (PlannerBand; defaults below), tables built with
//            the planner's time and memory model FOR EACH GPU TYPE
//            (scaler/planner_predictor.h): a type whose memory the initial layout overflows
//            gets no table (the job cannot run there), and iteration times, hence speedups
//            and throughput, differ per type.
// The simulator picks planner on a cluster with more than one GPU type and table2 otherwise
// (so the homogeneous ElasticFlow runs keep FlexTrain's Table-2 jobs); --models overrides.
// Guarantees: pure; a job that has no table on a type gets nullopt and a reason, never a crash.
// Caveats: cluster GPU names are matched to the planner catalog by name or alias, plus the
//   Alibaba names V100M16 -> V100-16 and V100M32 -> V100-32; A10, P100 and G1-G3 have no
//   catalog entry, so planner-modelled (elastic) jobs do not run on them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scaler/scale_table.h"

namespace flotilla::simulator {

enum class JobModelSource { automatic, table2, planner };
std::optional<JobModelSource> parse_job_model_source(const std::string& name);

// Jobs with at least min_gpus GPUs (the highest band whose min_gpus <= the request) run `preset`
// with DP dp, TP tp, PP = gpus / (dp * tp), micro-batch 1, global batch global_batch, bf16
// mixed precision, ZeRO-1 and, when full_recompute, full activation recomputation.
struct PlannerBand {
  int min_gpus = 0;
  std::string preset;
  int dp = 1;
  int tp = 1;
  int global_batch = 256;
  bool full_recompute = false;
};

// small: GPT-Neo-2.7B; medium [64, 256): Llama-2-7B; large >= 256: Llama-2-13B; all DP 8, TP 1,
// the two Llamas with full recompute (without it their 4k-token activations overflow 80 GB).
std::vector<PlannerBand> default_planner_bands(int min_gpus);

struct SimJobModel {
  std::string name;
  std::string gpu_type;       // the type this table is for ("" for table2: any type)
  double checkpoint_bytes = 0;
  double initial_iteration_s = 0;  // at the requested layout, on gpu_type
  scaler::ScaleTable table;
};

struct SimJobModelResult {
  std::optional<SimJobModel> model;
  std::string why;  // when model is empty
};

SimJobModelResult table2_job_model(int gpus, int min_gpus, const scaler::ScaleTableParams& params);
SimJobModelResult planner_job_model(int gpus, const std::string& gpu_type,
                                    const std::vector<PlannerBand>& bands,
                                    const scaler::ScaleTableParams& params);

// The planner catalog's name for a cluster's GPU type name; "" when it has none.
std::string planner_gpu_name(const std::string& cluster_gpu_type);

}  // namespace flotilla::simulator
