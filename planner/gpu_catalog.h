// GPU types: memory, peak compute, bandwidths, node shape and price.
//
// Guarantees: builtin_gpu_catalog() holds A100-40, A100-80, H100-80, H200, GH200-96 (alias
//   GH-96), V100-16, V100-32, L4, A10G, T4, RTX-2080, RTX-3090, RTX-4090, Titan-RTX with public
//   spec-sheet numbers (sources in docs/planner.md) and Sailor's GCP prices where Sailor gives
//   them. find() is case-insensitive and accepts aliases. An override (YAML) replaces any field
//   of any type, or adds a type.
// Assumes: memory_bytes is what the framework can allocate (Sailor's basic_cluster_config
//   values where they exist), peak_bf16_tflops is dense (no sparsity) fp16/bf16 tensor peak.
// Caveats: compute_efficiency is the fraction of peak a transformer layer reaches, fitted once
//   over all of Sailor's profiles per GPU type (planner/calibration.h); types without profiles
//   carry a documented default.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/emulated_gpu.h"
#include "planner/result.h"

namespace flotilla::planner {

struct GpuType {
  std::string name;
  std::vector<std::string> aliases;
  std::int64_t memory_bytes = 0;
  double peak_bf16_tflops = 0;
  double mem_bandwidth_bytes_per_s = 0;
  int gpus_per_node = 8;
  double intra_node_bandwidth_bytes_per_s = 0;  // per GPU, one direction (NVLink / PCIe)
  double inter_node_bandwidth_bytes_per_s = 0;  // per node NIC, one direction
  double usd_per_hour = 0;                      // per GPU
  double compute_efficiency = 0.35;             // achieved / peak for transformer layers
  // Memory a training process holds outside its tensors (planner/runtime_overhead.h adds NCCL
  // buffers and the cuBLAS workspace to these): the CUDA context with its loaded kernel modules,
  // which depends on architecture, driver and CUDA's module loading. GH200: fitted on Sailor's
  // Clariden runs (calibration.h fit_memory_overheads); other types: a documented default
  // (docs/planner.md, "Runtime overheads"). Override key `cuda_context_bytes` (older name
  // `runtime_overhead_bytes` accepted).
  std::int64_t cuda_context_bytes = 2000LL * 1000000LL;
  // NCCL channels per communicator (NCCL picks them from the topology: many on NVLink, few over
  // PCIe) and whether NCCL enables its LL128 protocol (NVLink, Ampere and newer).
  int nccl_channels = 2;
  bool nccl_ll128 = false;
  // PyTorch's cuBLAS workspace per device: :4096:2:16:8 = 8.125 MiB, 32 MiB on Hopper.
  std::int64_t cublas_workspace_bytes = 8519680;
  // FlashAttention-2 kernels need Ampere (sm80) or newer; Volta/Turing (V100, T4, RTX-2080,
  // Titan-RTX) fall back to materialised attention scores.
  bool supports_flash_attention = true;
  // An emulated type (`emulated: true` in an override): no such hardware exists. devcluster's
  // nodes of this type export its speed and memory to their pods (common/emulated_gpu.h), and
  // the reference worker's CPU backend runs at this speed and within this memory. The planner
  // plans for it like any other type.
  bool emulated = false;

  // Field by field: the stage DP's memo (stage_dp_memo.h) treats two copies alike.
  bool operator==(const GpuType&) const = default;
};

class GpuCatalog {
 public:
  GpuCatalog() = default;
  explicit GpuCatalog(std::vector<GpuType> types) : types_(std::move(types)) {}

  const GpuType* find(std::string_view name) const;
  // Index into types(), or -1. Indices are stable until the next upsert.
  int index_of(std::string_view name) const;
  const std::vector<GpuType>& types() const { return types_; }
  void upsert(GpuType type);  // replaces the type with the same (normalized) name

 private:
  std::vector<GpuType> types_;
};

GpuCatalog builtin_gpu_catalog();

// FLOP/s a transformer layer reaches on this type: peak x compute_efficiency (floored at 1 %),
// what the FLOP time model divides by.
double effective_flops_per_s(const GpuType& gpu);

// The catalog's `emulated: true` types as the environment contract devcluster's nodes give
// their pods (common/emulated_gpu.h): effective FLOP/s, memory and memory bandwidth.
std::vector<EmulatedGpu> emulated_gpus(const GpuCatalog& catalog);

// Applies a YAML/JSON override: either a map `name: {field: value, ...}` or a list of
// `{name: ..., field: value}`. Unknown fields or negative values give one clear line.
Result<GpuCatalog> apply_catalog_override(GpuCatalog base, std::string_view yaml_text);

}  // namespace flotilla::planner
