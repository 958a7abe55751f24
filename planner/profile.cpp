#include "planner/profile.h"

#include <algorithm>

namespace flotilla::planner {
namespace {

LayerTimes lerp(const LayerTimes& a, const LayerTimes& b, double w) {
  return {a.forward_s + (b.forward_s - a.forward_s) * w, a.backward_s + (b.backward_s - a.backward_s) * w,
          a.update_s + (b.update_s - a.update_s) * w};
}

bool names_match(const ModelSpec& model, const std::string& profile_model) {
  const std::string want = normalize_name(profile_model);
  if (normalize_name(model.name) == want) return true;
  for (const std::string& a : model.aliases) {
    if (normalize_name(a) == want) return true;
  }
  if (auto preset = find_preset(model.name)) {  // a spec named "OPT-350" matches "OPT-350M"
    if (normalize_name(preset->name) == want) return true;
    for (const std::string& a : preset->aliases) {
      if (normalize_name(a) == want) return true;
    }
  }
  if (auto preset = find_preset(profile_model)) return normalize_name(preset->name) == normalize_name(model.name);
  return false;
}

}  // namespace

void ProfileSet::add(GpuProfile profile) { profiles_.push_back(std::move(profile)); }

const GpuProfile* ProfileSet::find(const ModelSpec& model, std::string_view gpu) const {
  const std::string g = normalize_name(gpu);
  for (const GpuProfile& p : profiles_) {
    if (normalize_name(p.gpu) == g && names_match(model, p.model)) return &p;
  }
  return nullptr;
}

LayerTimes ComputeModel::estimate_block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp,
                                              int micro_batch_size) {
  const double flops = block_forward_flops(model, block, model.seq_len) * micro_batch_size / std::max(1, tp);
  const double rate = gpu.peak_bf16_tflops * 1e12 * std::max(0.01, gpu.compute_efficiency);
  LayerTimes t;
  t.forward_s = flops / rate;
  t.backward_s = 2.0 * t.forward_s;
  // Adam reads/writes ~16 B of state per parameter (fp32 master, m, v, grad): memory bound.
  const double params = static_cast<double>(block_params(model, block)) / std::max(1, tp);
  t.update_s = gpu.mem_bandwidth_bytes_per_s > 0 ? params * 32.0 / gpu.mem_bandwidth_bytes_per_s : 0.0;
  return t;
}

bool ComputeModel::has_profile(const ModelSpec& model, std::string_view gpu, int tp) const {
  if (profiles_ == nullptr) return false;
  const GpuProfile* p = profiles_->find(model, gpu);
  if (p == nullptr) return false;
  for (const auto& [mbs, by_tp] : p->by_mbs_tp) {
    auto it = by_tp.find(tp);
    if (it != by_tp.end() && static_cast<int>(it->second.size()) == model.num_blocks()) return true;
  }
  return false;
}

LayerTimes ComputeModel::block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp,
                                     int micro_batch_size) const {
  const GpuProfile* p = profiles_ ? profiles_->find(model, gpu.name) : nullptr;
  if (p == nullptr) {
    for (const std::string& alias : gpu.aliases) {
      if (profiles_ && (p = profiles_->find(model, alias)) != nullptr) break;
    }
  }
  if (p != nullptr) {
    // Profiled sizes for this TP, in increasing mbs.
    const LayerTimes* lo = nullptr;
    const LayerTimes* hi = nullptr;
    int lo_mbs = 0;
    int hi_mbs = 0;
    for (const auto& [mbs, by_tp] : p->by_mbs_tp) {
      auto it = by_tp.find(tp);
      if (it == by_tp.end() || block >= static_cast<int>(it->second.size())) continue;
      if (mbs <= micro_batch_size) {
        lo = &it->second[static_cast<std::size_t>(block)];
        lo_mbs = mbs;
      } else if (hi == nullptr) {
        hi = &it->second[static_cast<std::size_t>(block)];
        hi_mbs = mbs;
      }
    }
    if (lo != nullptr && lo_mbs == micro_batch_size) return *lo;
    if (lo != nullptr && hi != nullptr) {
      return lerp(*lo, *hi, static_cast<double>(micro_batch_size - lo_mbs) / (hi_mbs - lo_mbs));
    }
    if (lo != nullptr) {  // beyond the largest profiled size: compute scales linearly
      const double k = static_cast<double>(micro_batch_size) / lo_mbs;
      return {lo->forward_s * k, lo->backward_s * k, lo->update_s};
    }
    if (hi != nullptr) return *hi;  // below the smallest: launch-bound, keep its time
  }
  return estimate_block_times(model, gpu, block, tp, micro_batch_size);
}

LayerTimes ComputeModel::stage_times(const ModelSpec& model, const GpuType& gpu, int first_block, int last_block,
                                     int tp, int micro_batch_size) const {
  LayerTimes sum;
  for (int b = first_block; b < last_block; ++b) {
    const LayerTimes t = block_times(model, gpu, b, tp, micro_batch_size);
    sum.forward_s += t.forward_s;
    sum.backward_s += t.backward_s;
    sum.update_s += t.update_s;
  }
  return sum;
}

}  // namespace flotilla::planner
