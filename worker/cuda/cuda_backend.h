// The CUDA backend: GPU buffers, one kernel file per op (worker/cuda/*.cu), cuBLAS for the
// GEMMs. Compiled only with FLOTILLA_CUDA; this header has no CUDA includes so plain C++ can
// include it.
//
// Contract (beyond backend.h):
//  - Everything runs on the legacy default stream, so ops are ordered; copy_to_host waits.
//  - Scratch memory comes from the stream-ordered pool (cudaMallocAsync), so the per-op
//    allocations of Unit::forward/backward are cheap after the first step.
//  - Deterministic run to run on one GPU model and cuBLAS version: no atomics; column sums
//    (bias and LayerNorm weight grads, embedding grads) use fixed-size chunks reduced in order;
//    sum_squares uses a fixed grid and a host-side ordered sum.
//  - allow_tf32 = true lets cuBLAS use TF32 tensor cores (10-bit mantissa inputs): much faster,
//    less exact; the CPU-agreement tests use FP32.
#pragma once

#include <memory>
#include <string>

#include "worker/model/backend.h"

namespace flotilla::worker {

std::unique_ptr<Backend> make_cuda_backend(std::string* error, bool allow_tf32);
// 0 when no device is visible or the driver is missing (never throws).
int cuda_visible_device_count();
// Name of device 0 ("NVIDIA H100 80GB HBM3"), empty when none.
std::string cuda_device_name();
// UUID of device 0 ("GPU-" + 32 hex digits; unique per physical GPU), empty when none.
std::string cuda_device_uuid();

}  // namespace flotilla::worker
