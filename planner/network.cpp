#include "planner/network.h"

#include <algorithm>
#include <cmath>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"

namespace flotilla::planner {
namespace {

// Sailor fitted bandwidth_GB/s = polyval(coeffs, log2(message bytes / 1e6)) to send-recv and
// collective runs of 2^16 .. 2^30 bytes (profiling/networking/fit_func.py, run_all.py). Outside
// that range no fit applies: above it the bandwidth of the largest measured message is held;
// below the smallest message whose fitted bandwidth is positive (the quadratics turn negative
// near 64 KB for fast links), a message is assumed to take as long as that one (a latency floor),
// so a smaller message never gets a higher rate than a larger one. Capped at the measured peak.
constexpr int kSmallestFittedLog2Bytes = 16;
constexpr int kLargestFittedLog2Bytes = 30;

double fit_at(const BandwidthFit& f, double message_bytes) {
  const double x = std::log2(message_bytes / 1e6);
  double y = 0;
  for (double c : f.coeffs) y = y * x + c;
  return y * 1e9;
}

double eval_fit(const BandwidthFit& f, double message_bytes) {
  const double bytes = std::min(std::max(message_bytes, 1.0), std::ldexp(1.0, kLargestFittedLog2Bytes));
  double floor_bytes = 0;
  double floor_bw = 0;
  for (int k = kSmallestFittedLog2Bytes; k <= kLargestFittedLog2Bytes && !(floor_bw > 0); ++k) {
    floor_bytes = std::ldexp(1.0, k);
    floor_bw = fit_at(f, floor_bytes);
  }
  if (!(floor_bw > 0)) return f.peak_bytes_per_s > 0 ? f.peak_bytes_per_s * 0.01 : 1e6;
  double bw = bytes <= floor_bytes ? floor_bw * bytes / floor_bytes : fit_at(f, bytes);
  if (!(bw > 0)) bw = floor_bw;
  return f.peak_bytes_per_s > 0 ? std::min(bw, f.peak_bytes_per_s) : bw;
}

// The fit for this GPU type and group size: exact, else the nearest smaller, else the smallest.
const BandwidthFit* pick(const std::map<std::string, std::map<int, BandwidthFit>>& fits,
                         std::string_view gpu, int n, int& fit_n) {
  for (const auto& [name, by_n] : fits) {
    if (!same_name(name, gpu) || by_n.empty()) continue;
    auto it = by_n.upper_bound(n);
    if (it != by_n.begin()) --it;
    fit_n = it->first;
    return &it->second;
  }
  return nullptr;
}

}  // namespace

double NetworkModel::bandwidth_bytes_per_s(LinkKind link, std::string_view gpu, int gpus_per_node,
                                           double message_bytes) const {
  const int n = std::max(1, gpus_per_node);
  int fit_n = 1;
  switch (link) {
    case LinkKind::kIntraNode: {
      if (const BandwidthFit* f = pick(intra_node, gpu, n, fit_n)) return eval_fit(*f, message_bytes);
      return default_intra_node_bytes_per_s;
    }
    case LinkKind::kInterNode: {
      if (const BandwidthFit* f = pick(inter_node, gpu, n, fit_n)) {
        // Node total for fit_n GPUs sharing the NICs; each of our n GPUs gets its share.
        return eval_fit(*f, message_bytes) / std::max(fit_n, n);
      }
      return default_inter_node_bytes_per_s / n;
    }
    case LinkKind::kCrossZone:
      return default_cross_zone_bytes_per_s / n;
    case LinkKind::kCrossRegion:
      return default_cross_region_bytes_per_s / n;
  }
  return default_inter_node_bytes_per_s;
}

double NetworkModel::p2p_seconds(double bytes, LinkKind link, std::string_view gpu, int gpus_per_node) const {
  if (bytes <= 0) return 0;
  return latency_s + bytes / bandwidth_bytes_per_s(link, gpu, gpus_per_node, bytes);
}

double NetworkModel::allreduce_seconds(double bytes, int n, LinkKind link, std::string_view gpu,
                                       int gpus_per_node) const {
  if (n <= 1 || bytes <= 0) return 0;
  const double chunk = bytes / n;
  const double bw = bandwidth_bytes_per_s(link, gpu, gpus_per_node, chunk);
  return 2.0 * (n - 1) * (latency_s + chunk / bw);
}

double NetworkModel::usd_per_byte(std::string_view from_zone, std::string_view to_zone) const {
  if (from_zone == to_zone) return 0;
  auto a = usd_per_gb.find(std::string(from_zone));
  if (a != usd_per_gb.end()) {
    auto b = a->second.find(std::string(to_zone));
    if (b != a->second.end()) return b->second / 1e9;
  }
  // Facts from Sailor's data README: 0.01 USD/GB within a region, 0.02 across US regions.
  const auto region = [](std::string_view z) {
    const auto dash = z.rfind('-');
    return dash == std::string_view::npos ? z : z.substr(0, dash);
  };
  return (region(from_zone) == region(to_zone) ? 0.01 : 0.02) / 1e9;
}

LinkKind NetworkModel::link_between(std::string_view zone_a, std::string_view zone_b, bool same_node) const {
  if (same_node) return LinkKind::kIntraNode;
  if (zone_a == zone_b) return LinkKind::kInterNode;
  const auto region = [](std::string_view z) {
    const auto dash = z.rfind('-');
    return dash == std::string_view::npos ? z : z.substr(0, dash);
  };
  return region(zone_a) == region(zone_b) ? LinkKind::kCrossZone : LinkKind::kCrossRegion;
}

namespace {
std::string_view fit_name(const NetworkModel& n, const GpuType& gpu) {
  const auto known = [&](std::string_view name) {
    for (const auto* fits : {&n.intra_node, &n.inter_node}) {
      for (const auto& kv : *fits) {
        if (same_name(kv.first, name)) return true;
      }
    }
    return false;
  };
  if (known(gpu.name)) return gpu.name;
  for (const std::string& a : gpu.aliases) {
    if (known(a)) return a;
  }
  return gpu.name;
}
}  // namespace

double NetworkModel::bandwidth_bytes_per_s(LinkKind link, const GpuType& gpu, int gpus_per_node,
                                           double message_bytes) const {
  return bandwidth_bytes_per_s(link, fit_name(*this, gpu), gpus_per_node, message_bytes);
}
double NetworkModel::p2p_seconds(double bytes, LinkKind link, const GpuType& gpu, int gpus_per_node) const {
  return p2p_seconds(bytes, link, fit_name(*this, gpu), gpus_per_node);
}
double NetworkModel::allreduce_seconds(double bytes, int n, LinkKind link, const GpuType& gpu,
                                       int gpus_per_node) const {
  return allreduce_seconds(bytes, n, link, fit_name(*this, gpu), gpus_per_node);
}

void PairFits::set(std::string_view zone_a, std::string_view gpu_a, int n_a, std::string_view zone_b,
                   std::string_view gpu_b, int n_b, BandwidthFit fit) {
  // operator[] finds a key already there under another spelling (NameLess) before it adds one.
  fits_[std::string(zone_a)][std::string(gpu_a)][std::string(zone_b)][std::string(gpu_b)][{n_a, n_b}] =
      std::move(fit);
}

const PairFits::ByGroupSizes* PairFits::ends(std::string_view zone_a, std::string_view gpu_a, std::string_view zone_b,
                                             std::string_view gpu_b) const {
  auto za = fits_.find(zone_a);
  if (za == fits_.end()) return nullptr;
  auto ga = za->second.find(gpu_a);
  if (ga == za->second.end()) return nullptr;
  auto zb = ga->second.find(zone_b);
  if (zb == ga->second.end()) return nullptr;
  auto gb = zb->second.find(gpu_b);
  return gb == zb->second.end() ? nullptr : &gb->second;
}

const BandwidthFit* PairFits::find(std::string_view zone_a, const std::vector<std::string_view>& gpus_a,
                                   std::string_view zone_b, const std::vector<std::string_view>& gpus_b,
                                   int gpus_per_node) const {
  // The candidate end pairs in the order ties go; then the largest group size any of them has.
  std::vector<const ByGroupSizes*> candidates;
  for (std::string_view a : gpus_a)
    for (std::string_view b : gpus_b)
      for (const ByGroupSizes* sizes : {ends(zone_a, a, zone_b, b), ends(zone_b, b, zone_a, a)})
        if (sizes != nullptr) candidates.push_back(sizes);
  for (int k = gpus_per_node; k >= 1 && !candidates.empty(); --k)
    for (const ByGroupSizes* sizes : candidates)
      if (auto it = sizes->find({k, k}); it != sizes->end()) return &it->second;
  return nullptr;
}

double NetworkModel::pair_bandwidth_bytes_per_s(std::string_view zone_a, const GpuType& gpu_a, std::string_view zone_b,
                                                const GpuType& gpu_b, int gpus_per_node, double message_bytes) const {
  const int n = std::max(1, gpus_per_node);
  if (!pair_fits.empty()) {
    std::vector<std::string_view> names_a{gpu_a.name}, names_b{gpu_b.name};
    for (const std::string& a : gpu_a.aliases) names_a.push_back(a);
    for (const std::string& b : gpu_b.aliases) names_b.push_back(b);
    // The largest fitted group size <= n (node totals), shared by the n GPUs sending at once.
    if (const BandwidthFit* fit = pair_fits.find(zone_a, names_a, zone_b, names_b, n))
      return eval_fit(*fit, message_bytes) / n;
  }
  const LinkKind link = link_between(zone_a, zone_b, false);
  return std::min(bandwidth_bytes_per_s(link, gpu_a, n, message_bytes),
                  bandwidth_bytes_per_s(link, gpu_b, n, message_bytes));
}

NetworkModel default_network_model() { return NetworkModel{}; }

}  // namespace flotilla::planner
