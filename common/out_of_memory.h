// Whether a worker's failure line says its GPU ran out of memory: the one failure that restarting
// the same plan cannot fix. The sidecar then hands it to the operator instead of restarting the
// world locally, and the operator learns headroom from it (operator/memory_headroom.h).
//
// Guarantees: true for the out-of-GPU-memory lines the reference worker ("out of GPU memory",
//   worker/model/backend.h) and PyTorch/CUDA print ("CUDA out of memory", torch's
//   OutOfMemoryError, "CUDA error: out of memory", cudaErrorMemoryAllocation); false for host
//   memory ("out of host memory") and every other line.
// Caveats: matched by phrase, so a line quoting one of these phrases about something else counts.
#pragma once

#include <string_view>

namespace flotilla {

inline bool is_out_of_memory(std::string_view worker_line) {
  for (std::string_view phrase : {"out of GPU memory", "CUDA out of memory", "OutOfMemoryError",
                                  "CUDA error: out of memory", "cudaErrorMemoryAllocation"})
    if (worker_line.find(phrase) != std::string_view::npos) return true;
  return false;
}

}  // namespace flotilla
