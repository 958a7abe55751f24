#include "planner/network_io.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace flotilla::planner {
namespace {

using nlohmann::json;

bool parse_fits(const json& j, std::map<std::string, std::map<int, BandwidthFit>>& out, std::string& err) {
  if (!j.is_object()) {
    err = "bandwidth fits must be an object gpu -> count -> [coeffs, peak]";
    return false;
  }
  for (const auto& [gpu, by_n] : j.items()) {
    if (!by_n.is_object()) {
      err = "bandwidth fits for " + gpu + " must be an object";
      return false;
    }
    for (const auto& [n, v] : by_n.items()) {
      if (!v.is_array() || v.size() != 2 || !v[0].is_array() || !v[1].is_number()) {
        err = "bandwidth fit " + gpu + "/" + n + " must be [[coeffs...], peak_bytes_per_s]";
        return false;
      }
      BandwidthFit f;
      for (const json& c : v[0]) f.coeffs.push_back(c.get<double>());
      f.peak_bytes_per_s = v[1].get<double>();
      out[gpu][std::stoi(n)] = f;
    }
  }
  return true;
}

std::optional<std::string> read(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<NetworkModel> parse_intra_node_fits(std::string_view text, NetworkModel base) {
  try {
    json j = json::parse(text);
    std::string err;
    // Either {"intra": {...}, "inter": {...}} (network_coeffs_all_homo.json) or intra only.
    if (j.contains("intra") || j.contains("inter")) {
      if (j.contains("intra") && !parse_fits(j["intra"], base.intra_node, err)) return Result<NetworkModel>::failure(err);
      if (j.contains("inter") && !parse_fits(j["inter"], base.inter_node, err)) return Result<NetworkModel>::failure(err);
    } else if (!parse_fits(j, base.intra_node, err)) {
      return Result<NetworkModel>::failure(err);
    }
  } catch (const std::exception& e) {
    return Result<NetworkModel>::failure(std::string("network fits: ") + e.what());
  }
  return base;
}

Result<NetworkModel> parse_zone_costs(std::string_view text, NetworkModel base) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) return Result<NetworkModel>::failure("zone costs must be an object zone -> zone -> USD per GB");
    for (const auto& [a, row] : j.items()) {
      if (!row.is_object()) return Result<NetworkModel>::failure("zone costs for " + a + " must be an object zone -> USD per GB");
      for (const auto& [b, v] : row.items()) {
        const double usd = v.get<double>();
        if (usd < 0) return Result<NetworkModel>::failure("zone cost " + a + "->" + b + " is negative");
        base.usd_per_gb[a][b] = usd;
      }
    }
  } catch (const std::exception& e) {
    return Result<NetworkModel>::failure(std::string("zone costs: ") + e.what());
  }
  return base;
}

Result<NetworkModel> parse_multizone_fits(std::string_view text, NetworkModel base) {
  try {
    const json j = json::parse(text);
    // zone -> gpu -> n -> zone -> gpu -> n -> [coeffs, peak]
    for (const auto& [za, by_gpu] : j.items()) {
      for (const auto& [ga, by_n] : by_gpu.items()) {
        for (const auto& [na, by_zone] : by_n.items()) {
          for (const auto& [zb, by_gpu_b] : by_zone.items()) {
            for (const auto& [gb, by_n_b] : by_gpu_b.items()) {
              for (const auto& [nb, v] : by_n_b.items()) {
                if (!v.is_array() || v.size() != 2 || !v[0].is_array()) {
                  return Result<NetworkModel>::failure("multizone fit " + za + "/" + ga + " must be [[coeffs], peak]");
                }
                BandwidthFit f;
                for (const json& c : v[0]) f.coeffs.push_back(c.get<double>());
                f.peak_bytes_per_s = v[1].get<double>();
                base.pair_fits.set(za, ga, std::stoi(na), zb, gb, std::stoi(nb), std::move(f));
              }
            }
          }
        }
      }
    }
  } catch (const std::exception& e) {
    return Result<NetworkModel>::failure(std::string("multizone fits: ") + e.what());
  }
  return base;
}

Result<NetworkModel> load_network_dir(const std::string& dir) {
  NetworkModel m = default_network_model();
  const std::filesystem::path d(dir);
  if (!std::filesystem::is_directory(d)) return Result<NetworkModel>::failure("network directory '" + dir + "' does not exist");
  for (const char* name : {"network_coeffs_all_homo.json", "intra_node_bandwidths.json"}) {
    if (auto text = read(d / name)) {
      auto r = parse_intra_node_fits(*text, m);
      if (!r) return Result<NetworkModel>::failure(std::string(name) + ": " + r.error());
      m = std::move(r.value());
    }
  }
  for (const char* name : {"multizone_bandwidths.json", "multizone_bandwidths_het.json"}) {
    if (auto text = read(d / name)) {
      auto r = parse_multizone_fits(*text, m);
      if (!r) return Result<NetworkModel>::failure(std::string(name) + ": " + r.error());
      m = std::move(r.value());
    }
  }
  if (auto text = read(d / "gcp_communication_cost.json")) {
    auto r = parse_zone_costs(*text, m);
    if (!r) return Result<NetworkModel>::failure("gcp_communication_cost.json: " + r.error());
    m = std::move(r.value());
  }
  return m;
}

}  // namespace flotilla::planner
