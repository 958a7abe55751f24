#include "planner/gpu_catalog.h"

#include <algorithm>
#include <cmath>

#include <yaml-cpp/yaml.h>

#include "planner/model_spec.h"

namespace flotilla::planner {
namespace {

constexpr double kGB = 1e9;
constexpr std::int64_t kGiB = 1LL << 30;
constexpr std::int64_t kGh200ContextBytes = 4949LL * 1000000LL;

GpuType make(std::string name, std::vector<std::string> aliases, std::int64_t memory_bytes,
             double tflops, double mem_bw_gb, int per_node, double intra_gb, double inter_gb,
             double usd, double efficiency) {
  GpuType g;
  g.name = std::move(name);
  g.aliases = std::move(aliases);
  g.memory_bytes = memory_bytes;
  g.peak_bf16_tflops = tflops;
  g.mem_bandwidth_bytes_per_s = mem_bw_gb * kGB;
  g.gpus_per_node = per_node;
  g.intra_node_bandwidth_bytes_per_s = intra_gb * kGB;
  g.inter_node_bandwidth_bytes_per_s = inter_gb * kGB;
  g.usd_per_hour = usd;
  g.compute_efficiency = efficiency;
  return g;
}

}  // namespace

const GpuType* GpuCatalog::find(std::string_view name) const {
  const int i = index_of(name);
  return i < 0 ? nullptr : &types_[static_cast<std::size_t>(i)];
}

int GpuCatalog::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < types_.size(); ++i) {
    if (same_name(types_[i].name, name)) return static_cast<int>(i);
    for (const std::string& a : types_[i].aliases) {
      if (same_name(a, name)) return static_cast<int>(i);
    }
  }
  return -1;
}

void GpuCatalog::upsert(GpuType type) {
  const int i = index_of(type.name);
  if (i >= 0) types_[static_cast<std::size_t>(i)] = std::move(type);
  else types_.push_back(std::move(type));
}

// Sources and the efficiency fit: docs/planner.md ("GPU catalog"). Memory values for the types
// Sailor uses are its basic_cluster_config.json (what its framework could allocate); GPUs per
// node for those types follow the same file. Peaks are dense fp16/bf16 tensor throughput with
// fp32 accumulation (GeForce cards: the fp32-accumulate rate). Prices: Sailor's GCP prices
// where it gives them (A100-40, V100-16, GH-96), else public on-demand list prices, rounded.
// Efficiency: fit_compute_efficiency() (calibration.h) over all of Sailor's profiles, once per
// GPU type; tests/planner/calibration_test.cpp checks these values still match the fit. Types
// without profiles borrow the nearest profiled type's value (docs/planner.md).
GpuCatalog builtin_gpu_catalog() {
  std::vector<GpuType> t;
  //          name         aliases                       memory          TF     HBM GB/s node intra inter  $/h   eff
  t.push_back(make("A100-40", {"a100", "a100-40gb", "A100-SXM4-40GB"}, 42338615296LL, 312, 1555, 4, 300, 12.5, 3.673, 0.084));
  t.push_back(make("A100-80", {"a100-80gb", "A100-SXM4-80GB"}, 85899345920LL, 312, 2039, 4, 300, 12.5, 5.07, 0.124));
  t.push_back(make("H100-80", {"h100", "h100-sxm", "H100-SXM5-80GB"}, 80 * kGiB, 989, 3350, 8, 450, 50, 11.06, 0.101));
  t.push_back(make("H200", {"h200-141", "H200-SXM-141GB"}, 141LL * 1000000000LL, 989, 4800, 8, 450, 50, 12.3, 0.101));
  t.push_back(make("GH200-96", {"GH-96", "gh200", "GH200"}, 102625181696LL, 989, 4000, 4, 150, 25, 11.06, 0.101));
  t.push_back(make("V100-16", {"v100", "V100-SXM2-16GB"}, 17179869184LL, 125, 900, 4, 150, 3.1, 2.86, 0.077));
  t.push_back(make("V100-32", {"V100-SXM2-32GB"}, 32 * kGiB, 125, 900, 8, 150, 12.5, 3.06, 0.077));
  t.push_back(make("L4", {"nvidia-l4"}, 24 * kGiB, 121, 300, 8, 32, 12.5, 0.81, 0.077));
  t.push_back(make("A10G", {"a10g-24gb"}, 24 * kGiB, 70, 600, 8, 32, 12.5, 1.01, 0.077));
  t.push_back(make("T4", {"tesla-t4"}, 16 * kGiB, 65, 320, 4, 16, 4, 0.35, 0.077));
  t.push_back(make("RTX-2080", {"rtx2080", "rtx-2080-ti", "2080ti"}, 11811160064LL, 53.8, 616, 8, 16, 1.25, 0.25, 0.066));
  t.push_back(make("RTX-3090", {"rtx3090"}, 25769803776LL, 71, 936, 8, 32, 1.25, 0.40, 0.063));
  t.push_back(make("RTX-4090", {"rtx4090"}, 24 * kGiB, 165, 1008, 8, 32, 1.25, 0.70, 0.063));
  t.push_back(make("Titan-RTX", {"titanrtx", "titan-rtx-24gb"}, 25769803776LL, 130, 672, 8, 16, 1.25, 0.50, 0.028));
  for (GpuType& g : t) {
    // NVLink types: NCCL runs 16 channels per communicator (assumption; it picks them from the
    // topology) and, from Ampere on, the LL128 protocol. Hopper: 32 MiB cuBLAS workspace.
    const bool nvlink = g.name.rfind("A100", 0) == 0 || g.name.rfind("H100", 0) == 0 || g.name == "H200" ||
                        g.name == "GH200-96" || g.name.rfind("V100", 0) == 0;
    if (nvlink) g.nccl_channels = 16;
    g.nccl_ll128 = nvlink && g.name.rfind("V100", 0) != 0;
    if (g.name.rfind("H100", 0) == 0 || g.name == "H200" || g.name == "GH200-96") g.cublas_workspace_bytes = 32LL << 20;
    // Fitted on Sailor's 15 Clariden runs (fit_memory_overheads(), calibration.h), the residual
    // after the modelled tensors, NCCL buffers and cuBLAS workspace; CalibrationMemory checks it.
    if (g.name == "GH200-96") g.cuda_context_bytes = kGh200ContextBytes;
    // Pre-Ampere (Volta sm70, Turing sm75): no FlashAttention-2 kernels.
    if (g.name == "V100-16" || g.name == "V100-32" || g.name == "T4" || g.name == "RTX-2080" ||
        g.name == "Titan-RTX")
      g.supports_flash_attention = false;
  }
  return GpuCatalog(std::move(t));
}

namespace {
Result<GpuCatalog> apply_catalog_entries(GpuCatalog base, YAML::Node root);
}  // namespace

Result<GpuCatalog> apply_catalog_override(GpuCatalog base, std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Result<GpuCatalog>::failure(std::string("GPU catalog override does not parse: ") + e.what());
  }
  // Names and field keys must be strings; a map or list where one is expected is an error line.
  try {
    return apply_catalog_entries(std::move(base), root);
  } catch (const YAML::Exception& e) {
    return Result<GpuCatalog>::failure("GPU catalog override: a GPU name or field key is not a string (" +
                                       e.msg + ")");
  }
}

namespace {

Result<GpuCatalog> apply_catalog_entries(GpuCatalog base, YAML::Node root) {
  std::vector<std::pair<std::string, YAML::Node>> entries;
  if (root.IsMap() && root["gpus"]) root = root["gpus"];
  if (root.IsMap()) {
    for (const auto& kv : root) entries.emplace_back(kv.first.as<std::string>(), kv.second);
  } else if (root.IsSequence()) {
    for (const auto& n : root) {
      if (!n.IsMap() || !n["name"]) {
        return Result<GpuCatalog>::failure("GPU catalog override: every list entry needs a 'name'");
      }
      entries.emplace_back(n["name"].as<std::string>(), n);
    }
  } else if (!root.IsNull()) {
    return Result<GpuCatalog>::failure("GPU catalog override must be a map name -> fields or a list");
  }
  for (auto& [name, n] : entries) {
    if (!n.IsMap()) {
      return Result<GpuCatalog>::failure("GPU catalog override: '" + name +
                                         "' must be a map of fields (e.g. {memory_gb: 80})");
    }
    const GpuType* existing = base.find(name);
    GpuType g = existing ? *existing : GpuType{};
    if (!existing) g.name = name;
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>();
      if (key == "name") continue;
      double v = 0;
      try {
        if (key == "aliases") {
          g.aliases = kv.second.as<std::vector<std::string>>();
          continue;
        }
        if (key == "supports_flash_attention") {
          g.supports_flash_attention = kv.second.as<bool>();
          continue;
        }
        if (key == "nccl_ll128") {
          g.nccl_ll128 = kv.second.as<bool>();
          continue;
        }
        if (key == "emulated") {
          g.emulated = kv.second.as<bool>();
          continue;
        }
        v = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        return Result<GpuCatalog>::failure("GPU catalog override: " + name + "." + key + " is not a number");
      }
      if (!std::isfinite(v)) {
        return Result<GpuCatalog>::failure("GPU catalog override: " + name + "." + key +
                                           " is not a finite number");
      }
      if (v < 0) {
        return Result<GpuCatalog>::failure("GPU catalog override: " + name + "." + key +
                                           " is negative; give a non-negative value");
      }
      if (key == "memory_bytes") g.memory_bytes = static_cast<std::int64_t>(v);
      else if (key == "memory_gb") g.memory_bytes = static_cast<std::int64_t>(v * 1e9);
      else if (key == "peak_bf16_tflops") g.peak_bf16_tflops = v;
      else if (key == "mem_bandwidth_bytes_per_s") g.mem_bandwidth_bytes_per_s = v;
      else if (key == "gpus_per_node") g.gpus_per_node = static_cast<int>(v);
      else if (key == "intra_node_bandwidth_bytes_per_s") g.intra_node_bandwidth_bytes_per_s = v;
      else if (key == "inter_node_bandwidth_bytes_per_s") g.inter_node_bandwidth_bytes_per_s = v;
      else if (key == "usd_per_hour") g.usd_per_hour = v;
      else if (key == "compute_efficiency") {
        // A fraction of peak FLOP/s: 0 made every plan take hours, > 1 beats the hardware.
        if (v <= 0 || v > 1)
          return Result<GpuCatalog>::failure("GPU catalog override: " + name +
                                             ".compute_efficiency must be in (0, 1], the "
                                             "fraction of peak FLOP/s a layer achieves");
        g.compute_efficiency = v;
      }
      else if (key == "cuda_context_bytes" || key == "runtime_overhead_bytes") g.cuda_context_bytes = static_cast<std::int64_t>(v);
      else if (key == "nccl_channels") g.nccl_channels = static_cast<int>(v);
      else if (key == "cublas_workspace_bytes") g.cublas_workspace_bytes = static_cast<std::int64_t>(v);
      else {
        return Result<GpuCatalog>::failure("GPU catalog override: unknown field '" + key + "' for " + name);
      }
    }
    if (g.memory_bytes <= 0 || g.peak_bf16_tflops <= 0 || g.gpus_per_node <= 0) {
      return Result<GpuCatalog>::failure("GPU catalog override: new type '" + name +
                                         "' needs memory_bytes, peak_bf16_tflops and gpus_per_node > 0");
    }
    base.upsert(std::move(g));
  }
  return base;
}

}  // namespace

double effective_flops_per_s(const GpuType& gpu) {
  return gpu.peak_bf16_tflops * 1e12 * std::max(0.01, gpu.compute_efficiency);
}

std::vector<EmulatedGpu> emulated_gpus(const GpuCatalog& catalog) {
  std::vector<EmulatedGpu> out;
  for (const GpuType& g : catalog.types())
    if (g.emulated)
      out.push_back({g.name, effective_flops_per_s(g), static_cast<double>(g.memory_bytes), g.mem_bandwidth_bytes_per_s});
  return out;
}

}  // namespace flotilla::planner
