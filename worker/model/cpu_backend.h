// CpuBackend: the CPU reference backend. Host memory, single-threaded, bit-deterministic;
// every op forwards to the float instantiation of worker/ops/.
#pragma once

#include "worker/model/backend.h"

namespace flotilla::worker {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace flotilla::worker
