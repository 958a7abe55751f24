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
#include <utility>
#include <vector>

#include "planner/model_spec.h"

namespace flotilla::planner {

struct GpuType;

enum class LinkKind { kIntraNode, kInterNode, kCrossZone, kCrossRegion };

// Sailor's fit: bandwidth_GB/s(message) = polyval(coeffs, log2(message bytes / 1e6)), capped at
// peak_bytes_per_s. Inter-node fits are per node (all n GPUs of a node sending at once).
struct BandwidthFit {
  std::vector<double> coeffs;
  double peak_bytes_per_s = 0;
};

// Sailor's multizone fits (multizone_bandwidths*.json): node-to-node between two (zone, GPU type)
// node kinds with n_a and n_b GPUs per node taking part. Names match as normalize_name() does.
// Guarantees: find() builds no string (the search looks links up for every candidate it times).
class PairFits {
 public:
  void set(std::string_view zone_a, std::string_view gpu_a, int n_a, std::string_view zone_b,
           std::string_view gpu_b, int n_b, BandwidthFit fit);
  // The fit between (zone_a, any of gpus_a) and (zone_b, any of gpus_b), in either direction,
  // for the largest group size k <= gpus_per_node fitted on both ends (n_a = n_b = k); on a tie,
  // the earlier names and the a -> b direction first. nullptr when there is none.
  const BandwidthFit* find(std::string_view zone_a, const std::vector<std::string_view>& gpus_a,
                           std::string_view zone_b, const std::vector<std::string_view>& gpus_b,
                           int gpus_per_node) const;
  bool empty() const { return fits_.empty(); }
  void clear() { fits_.clear(); }

 private:
  template <class V>
  using ByName = std::map<std::string, V, NameLess>;
  using ByGroupSizes = std::map<std::pair<int, int>, BandwidthFit>;
  // zone a -> GPU a -> zone b -> GPU b -> (n_a, n_b) -> fit
  ByName<ByName<ByName<ByName<ByGroupSizes>>>> fits_;
  const ByGroupSizes* ends(std::string_view zone_a, std::string_view gpu_a, std::string_view zone_b,
                           std::string_view gpu_b) const;
};

struct NetworkModel {
  // gpu type -> gpus in the group -> fit
  std::map<std::string, std::map<int, BandwidthFit>> intra_node;
  // gpu type -> GPUs per node taking part -> fit for node-to-node within a zone (node total)
  std::map<std::string, std::map<int, BandwidthFit>> inter_node;
  // Measured node-to-node links between node kinds; heterogeneous pairs can be far slower than
  // either homogeneous link (e.g. Titan-RTX <-> RTX-3090 at 0.1 GB/s).
  PairFits pair_fits;

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
