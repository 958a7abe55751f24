// Link bandwidths and collective/p2p times per link kind, plus cross-zone traffic prices.
//
// Guarantees: bandwidth_bytes_per_s() is positive for every link kind (sensible defaults where
//   no measured fit applies); fits from Sailor's network/ folder are used where they apply
//   (intra-node per GPU type and group size; inter-node / cross-zone per zone pair and type).
// Assumes: ring collectives; the slowest link on the ring bounds it.
// Caveats: no congestion model between concurrent collectives.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla::planner {

struct GpuType;

enum class LinkKind { kIntraNode, kInterNode, kCrossZone, kCrossRegion };

// Sailor's fit: bandwidth_GB/s(message) = polyval(coeffs, log2(message bytes / 1e6)), capped at
// peak_bytes_per_s. Inter-node fits are per node (all n GPUs of a node sending at once).
struct BandwidthFit {
  std::vector<double> coeffs;
  double peak_bytes_per_s = 0;
};

struct NetworkModel {
  // gpu type -> gpus in the group -> fit
  std::map<std::string, std::map<int, BandwidthFit>> intra_node;
  // gpu type -> GPUs per node taking part -> fit for node-to-node within a zone (node total)
  std::map<std::string, std::map<int, BandwidthFit>> inter_node;
  // Sailor's multizone fits (multizone_bandwidths*.json): node-to-node between (zone, GPU type,
  // GPUs per node) pairs, keyed by pair_key(); heterogeneous pairs can be far slower than
  // either homogeneous link (e.g. Titan-RTX <-> RTX-3090 at 0.1 GB/s).
  std::map<std::string, BandwidthFit> pair_fits;
  static std::string pair_key(std::string_view zone_a, std::string_view gpu_a, int n_a, std::string_view zone_b,
                              std::string_view gpu_b, int n_b);

  double default_intra_node_bytes_per_s = 100e9;
  double default_inter_node_bytes_per_s = 12.5e9;   // 100 Gb/s
  double default_cross_zone_bytes_per_s = 5e9;      // measured scale of GCP same-region
  double default_cross_region_bytes_per_s = 1e9;
  double latency_s = 20e-6;
  // zone -> zone -> USD per GB (gcp_communication_cost.json)
  std::map<std::string, std::map<std::string, double>> usd_per_gb;

  // Per-GPU bandwidth when `gpus_per_node` GPUs of each node use the link at once.
  double bandwidth_bytes_per_s(LinkKind link, std::string_view gpu, int gpus_per_node,
                               double message_bytes) const;
  double p2p_seconds(double bytes, LinkKind link, std::string_view gpu, int gpus_per_node = 1) const;
  // Ring all-reduce of `bytes` among n participants over the given (slowest) link.
  double allreduce_seconds(double bytes, int n, LinkKind link, std::string_view gpu,
                           int gpus_per_node = 1) const;
  // The same, naming the GPU by its catalog entry: fits keyed by any of its aliases match.
  double bandwidth_bytes_per_s(LinkKind link, const GpuType& gpu, int gpus_per_node, double message_bytes) const;
  double p2p_seconds(double bytes, LinkKind link, const GpuType& gpu, int gpus_per_node) const;
  double allreduce_seconds(double bytes, int n, LinkKind link, const GpuType& gpu, int gpus_per_node) const;
  // Per-GPU bandwidth between GPUs on two different nodes, `gpus_per_node` of each node sending
  // at once: the multizone pair fit when one exists (either direction), else the LinkKind
  // model for the two zones, the slower GPU type bounding.
  double pair_bandwidth_bytes_per_s(std::string_view zone_a, const GpuType& gpu_a, std::string_view zone_b,
                                    const GpuType& gpu_b, int gpus_per_node, double message_bytes) const;
  double usd_per_byte(std::string_view from_zone, std::string_view to_zone) const;
  LinkKind link_between(std::string_view zone_a, std::string_view zone_b, bool same_node) const;
};

NetworkModel default_network_model();

}  // namespace flotilla::planner
