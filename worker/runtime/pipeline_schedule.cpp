#include "worker/runtime/pipeline_schedule.h"

#include <algorithm>

namespace flotilla::worker {

std::vector<PipelineOp> one_f_one_b(int stage, int num_stages, int num_micro_batches) {
  std::vector<PipelineOp> ops;
  const int warmup = std::min(num_stages - stage - 1, num_micro_batches);
  int next_f = 0;
  int next_b = 0;
  for (; next_f < warmup; ++next_f) ops.push_back({true, next_f});
  while (next_f < num_micro_batches) {
    ops.push_back({true, next_f++});
    ops.push_back({false, next_b++});
  }
  while (next_b < num_micro_batches) ops.push_back({false, next_b++});
  return ops;
}

}  // namespace flotilla::worker
