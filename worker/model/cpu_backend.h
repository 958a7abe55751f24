// CpuBackend: the CPU reference backend. Host memory, single-threaded, bit-deterministic;
// every op forwards to the float instantiation of worker/ops/.
// make_emulated_gpu_backend(): the same backend holding at most memory_bytes live (an emulated
// GPU type's memory, common/emulated_gpu.h): an allocation past it throws OutOfMemoryError
// "out of GPU memory: ..." as the CUDA backend does, memory_kind() is "GPU", and peak_bytes()
// is the high-water mark of live bytes. Results are bit-identical to make_cpu_backend()'s.
#pragma once

#include <string>

#include "worker/model/backend.h"

namespace flotilla::worker {

std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_emulated_gpu_backend(std::size_t memory_bytes, const std::string& gpu_type);

}  // namespace flotilla::worker
