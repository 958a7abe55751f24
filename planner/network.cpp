#include "planner/network.h"

#include <algorithm>
#include <cmath>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"

namespace flotilla::planner {
namespace {

double eval_fit(const BandwidthFit& f, double message_bytes) {
  const double x = std::log10(std::max(message_bytes, 1.0));
  double y = 0;
  for (double c : f.coeffs) y = y * x + c;
  const double bw = y * 1e9;
  if (!(bw > 0)) return f.peak_bytes_per_s > 0 ? f.peak_bytes_per_s * 0.01 : 1e6;
  return f.peak_bytes_per_s > 0 ? std::min(bw, f.peak_bytes_per_s) : bw;
}

// The fit for this GPU type and group size: exact, else the nearest smaller, else the smallest.
const BandwidthFit* pick(const std::map<std::string, std::map<int, BandwidthFit>>& fits,
                         std::string_view gpu, int n, int& fit_n) {
  const std::string want = normalize_name(gpu);
  for (const auto& [name, by_n] : fits) {
    if (normalize_name(name) != want || by_n.empty()) continue;
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
    const std::string want = normalize_name(name);
    for (const auto* fits : {&n.intra_node, &n.inter_node}) {
      for (const auto& kv : *fits) {
        if (normalize_name(kv.first) == want) return true;
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

NetworkModel default_network_model() { return NetworkModel{}; }

}  // namespace flotilla::planner
