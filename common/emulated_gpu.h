// The emulated-GPU contract between devcluster and the reference worker: the environment a
// pod on a node of an emulated GPU type gets (devcluster/kubelet.cpp writes it, from the GPU
// catalog's `emulated: true` types), and that the worker's CPU backend reads
// (worker/runtime/emulated_gpu_run.h) to run at that type's speed and within its memory.
//
// Guarantees: to_env() and from_env() are inverses for every field (numbers print with 17
//   significant digits). from_env() returns nullopt when FLOTILLA_EMULATED_GPU_TYPE is unset
//   (a real GPU, or a plain CPU run), and an error line when a number is missing or not positive.
// Assumes: the numbers are the catalog's: flops_per_s = peak_bf16_tflops x 1e12 x
//   compute_efficiency (what the planner's FLOP time model divides by), memory_bytes the
//   type's memory_bytes, memory_bandwidth_bytes_per_s the catalog's (the optimizer step's pace).
// Caveats: a real cluster never sets these; they exist only where the hardware is emulated.
#pragma once

#include "common/significant_digits.h"

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flotilla {

inline constexpr const char* kEmulatedGpuTypeEnv = "FLOTILLA_EMULATED_GPU_TYPE";
inline constexpr const char* kEmulatedGpuFlopsEnv = "FLOTILLA_EMULATED_GPU_FLOPS_PER_S";
inline constexpr const char* kEmulatedGpuMemoryEnv = "FLOTILLA_EMULATED_GPU_MEMORY_BYTES";
inline constexpr const char* kEmulatedGpuBandwidthEnv = "FLOTILLA_EMULATED_GPU_MEMORY_BANDWIDTH_BYTES_PER_S";

struct EmulatedGpu {
  std::string type;
  double flops_per_s = 0;
  double memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  bool operator==(const EmulatedGpu&) const = default;
};

inline std::vector<std::pair<std::string, std::string>> to_env(const EmulatedGpu& gpu) {
  auto number = [](double v) { return significant_digits_text(v, 17); };  // round-trips exactly
  return {{kEmulatedGpuTypeEnv, gpu.type},
          {kEmulatedGpuFlopsEnv, number(gpu.flops_per_s)},
          {kEmulatedGpuMemoryEnv, number(gpu.memory_bytes)},
          {kEmulatedGpuBandwidthEnv, number(gpu.memory_bandwidth_bytes_per_s)}};
}

// `lookup` returns the variable's value, or nullopt when it is unset.
inline std::optional<EmulatedGpu> from_env(const std::function<std::optional<std::string>(const char*)>& lookup,
                                           std::string* error) {
  const auto type = lookup(kEmulatedGpuTypeEnv);
  if (!type) return std::nullopt;
  EmulatedGpu gpu;
  gpu.type = *type;
  for (auto [name, field] : {std::pair{kEmulatedGpuFlopsEnv, &gpu.flops_per_s},
                             std::pair{kEmulatedGpuMemoryEnv, &gpu.memory_bytes},
                             std::pair{kEmulatedGpuBandwidthEnv, &gpu.memory_bandwidth_bytes_per_s}}) {
    const auto text = lookup(name);
    char* end = nullptr;
    const double v = text ? std::strtod(text->c_str(), &end) : 0.0;
    if (!text || end == text->c_str() || *end != '\0' || !(v > 0)) {
      *error = std::string(kEmulatedGpuTypeEnv) + "=" + *type + " is set but " + name + " is " +
               (text ? "'" + *text + "'" : std::string("unset")) + "; it must be a positive number";
      return std::nullopt;
    }
    *field = v;
  }
  return gpu;
}

inline std::optional<EmulatedGpu> emulated_gpu_from_process_env(std::string* error) {
  return from_env(
      [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        return v ? std::optional<std::string>(v) : std::nullopt;
      },
      error);
}

}  // namespace flotilla
