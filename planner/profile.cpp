#include "planner/profile.h"

#include "common/transformer_flops.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace flotilla::planner {
namespace {

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

namespace {

// Least squares of y = a + b x with weights 1/y^2; returns {a, b}. Falls back to a line
// through the origin from the single point when the sizes do not determine a line.
std::pair<double, double> relative_linear_fit(const std::vector<std::pair<double, double>>& xy) {
  double s0 = 0, s1 = 0, s2 = 0, sy = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    const double w = 1.0 / std::max(y * y, 1e-30);
    s0 += w;
    s1 += w * x;
    s2 += w * x * x;
    sy += w * y;
    sxy += w * x * y;
  }
  const double det = s0 * s2 - s1 * s1;
  if (xy.size() < 2 || std::abs(det) < 1e-12 * s0 * s2) {
    const auto& [x, y] = xy.front();
    return {0.0, y / x};
  }
  const double a = (sy * s2 - s1 * sxy) / det;
  const double b = (s0 * sxy - s1 * sy) / det;
  if (b < 0) {  // time cannot fall with more samples: use the weighted mean as a constant
    return {sy / s0, 0.0};
  }
  return {a, b};
}

}  // namespace

void fit_profile(GpuProfile& p) {
  p.fit_by_tp.clear();
  std::map<int, std::size_t> blocks_by_tp;
  for (const auto& [mbs, by_tp] : p.by_mbs_tp) {
    for (const auto& [tp, times] : by_tp) blocks_by_tp[tp] = std::max(blocks_by_tp[tp], times.size());
  }
  for (const auto& [tp, nblocks] : blocks_by_tp) {
    std::vector<BlockFit> fits(nblocks);
    for (std::size_t b = 0; b < nblocks; ++b) {
      std::vector<std::pair<double, double>> fwd, bwd, upd;
      for (const auto& [mbs, by_tp] : p.by_mbs_tp) {
        auto it = by_tp.find(tp);
        if (it == by_tp.end() || b >= it->second.size()) continue;
        const LayerTimes& t = it->second[b];
        fwd.emplace_back(mbs, t.forward_s);
        bwd.emplace_back(mbs, t.backward_s);
        upd.emplace_back(mbs, t.update_s);
      }
      if (fwd.empty()) continue;
      const auto [fa, fb] = relative_linear_fit(fwd);
      const auto [ba, bb] = relative_linear_fit(bwd);
      // The optimizer step does not depend on the micro-batch size: take the mean.
      double u = 0;
      for (const auto& xy : upd) u += xy.second;
      fits[b] = BlockFit{{fa, ba, u / static_cast<double>(upd.size())}, {fb, bb, 0.0}};
    }
    std::vector<BlockFit> prefix(fits.size() + 1);
    for (std::size_t b = 0; b < fits.size(); ++b) {
      const BlockFit& f = fits[b];
      BlockFit& next = prefix[b + 1];
      next = prefix[b];
      next.fixed += f.fixed;
      next.per_sample += f.per_sample;
    }
    p.prefix_by_tp[tp] = std::move(prefix);
    p.fit_by_tp[tp] = std::move(fits);
  }
  p.normalized_model = normalize_name(p.model);
  p.normalized_gpu = normalize_name(p.gpu);
}

std::string profile_block_mismatch(const GpuProfile& profile, const ModelSpec& model) {
  for (const auto& [mbs, by_tp] : profile.by_mbs_tp) {
    for (const auto& [tp, blocks] : by_tp) {
      if (static_cast<int>(blocks.size()) == model.num_blocks()) continue;
      return "profile " + profile.model + "/" + profile.gpu + " (mbs " + std::to_string(mbs) + ", TP " +
             std::to_string(tp) + ") has " + std::to_string(blocks.size()) + " blocks but " + model.name + " has " +
             std::to_string(model.num_blocks()) + " (embedding + " + std::to_string(model.num_layers) +
             " layers + head): it was measured on another model; replace or remove it";
    }
  }
  return "";
}

void fold_separate_final_norm(GpuProfile& profile, const ModelSpec& model) {
  for (auto& [mbs, by_tp] : profile.by_mbs_tp) {
    for (auto& [tp, blocks] : by_tp) {
      if (static_cast<int>(blocks.size()) != model.num_blocks() + 1) continue;
      LayerTimes& norm = blocks[blocks.size() - 2];
      const LayerTimes& head = blocks.back();
      norm.forward_s += head.forward_s;
      norm.backward_s += head.backward_s;
      // Sailor's Llama profile repeats one update time on every block; the norm's own
      // parameters are a hidden-size vector, so the head's update stands for both.
      norm.update_s = std::max(norm.update_s, head.update_s);
      blocks.pop_back();
    }
  }
}

void ProfileSet::add(GpuProfile profile) {
  fit_profile(profile);
  profiles_.push_back(std::move(profile));
}

const GpuProfile* ProfileSet::find(const ModelSpec& model, std::string_view gpu) const {
  const std::string g = normalize_name(gpu);
  for (const GpuProfile& p : profiles_) {
    if (p.normalized_gpu == g && names_match(model, p.model) && profile_block_mismatch(p, model).empty()) return &p;
  }
  return nullptr;
}

const GpuProfile* ProfileSet::find(const ModelSpec& model, const GpuType& gpu) const {
  const GpuProfile* found = find(model, gpu.name);
  for (std::size_t i = 0; found == nullptr && i < gpu.aliases.size(); ++i) found = find(model, gpu.aliases[i]);
  return found;
}

const GpuProfile* ComputeModel::resolve(const ModelSpec& model, const GpuType& gpu) const {
  if (profiles_ == nullptr || profiles_->all().empty()) return nullptr;
  for (const Resolved& r : resolved_) {
    if (r.gpu == gpu.name && r.model == model.name) return r.profile;
  }
  const GpuProfile* found = profiles_->find(model, gpu);
  resolved_.push_back({model.name, gpu.name, found});
  return found;
}

LayerTimes ComputeModel::estimate_block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp,
                                              int micro_batch_size) {
  const double flops = block_forward_flops(model, block, model.seq_len) * micro_batch_size / std::max(1, tp);
  const double rate = effective_flops_per_s(gpu);
  LayerTimes t;
  t.forward_s = flops / rate;
  t.backward_s = kBackwardPerForwardFlops * t.forward_s;
  // Adam reads/writes ~16 B of state per parameter (fp32 master, m, v, grad): memory bound.
  const double params = static_cast<double>(block_params(model, block)) / std::max(1, tp);
  t.update_s = optimizer_update_seconds(params, gpu.mem_bandwidth_bytes_per_s);
  return t;
}

LayerTimes ComputeModel::block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp,
                                     int micro_batch_size) const {
  const GpuProfile* p = resolve(model, gpu);
  if (p != nullptr) {
    auto it = p->fit_by_tp.find(tp);
    if (it != p->fit_by_tp.end() && block < static_cast<int>(it->second.size())) {
      const BlockFit& f = it->second[static_cast<std::size_t>(block)];
      const double b = micro_batch_size;
      return {std::max(0.0, f.fixed.forward_s + f.per_sample.forward_s * b),
              std::max(0.0, f.fixed.backward_s + f.per_sample.backward_s * b),
              std::max(0.0, f.fixed.update_s + f.per_sample.update_s * b)};
    }
  }
  return estimate_block_times(model, gpu, block, tp, micro_batch_size);
}

LayerTimes ComputeModel::stage_times(const ModelSpec& model, const GpuType& gpu, int first_block, int last_block,
                                     int tp, int micro_batch_size) const {
  if (const GpuProfile* p = resolve(model, gpu)) {
    auto it = p->prefix_by_tp.find(tp);
    if (it != p->prefix_by_tp.end() && last_block < static_cast<int>(it->second.size()) && first_block >= 0) {
      const BlockFit& hi = it->second[static_cast<std::size_t>(last_block)];
      const BlockFit& lo = it->second[static_cast<std::size_t>(first_block)];
      const double b = micro_batch_size;
      return {
          std::max(0.0,
                   hi.fixed.forward_s - lo.fixed.forward_s + (hi.per_sample.forward_s - lo.per_sample.forward_s) * b),
          std::max(0.0, hi.fixed.backward_s - lo.fixed.backward_s +
                            (hi.per_sample.backward_s - lo.per_sample.backward_s) * b),
          std::max(0.0, hi.fixed.update_s - lo.fixed.update_s + (hi.per_sample.update_s - lo.per_sample.update_s) * b)};
    }
  }
  // FLOP estimate: the embedding, identical transformer layers, and the head.
  LayerTimes sum;
  const auto add = [&](const LayerTimes& t, double times) { sum += t * times; };
  const int head = model.num_layers + 1;
  if (first_block == 0 && last_block > 0) add(estimate_block_times(model, gpu, 0, tp, micro_batch_size), 1);
  const int layers = std::min(last_block, head) - std::max(first_block, 1);
  if (layers > 0) add(estimate_block_times(model, gpu, 1, tp, micro_batch_size), layers);
  if (last_block > head) add(estimate_block_times(model, gpu, head, tp, micro_batch_size), 1);
  return sum;
}

}  // namespace flotilla::planner
