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

// Sailor's fit: bandwidth_GB/s(message) = polyval(coeffs, log10(message bytes)), capped at
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
  double usd_per_byte(std::string_view from_zone, std::string_view to_zone) const;
  LinkKind link_between(std::string_view zone_a, std::string_view zone_b, bool same_node) const;
};

NetworkModel default_network_model();

}  // namespace flotilla::planner
