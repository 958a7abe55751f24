// Reading Sailor's measured network fits and GCP traffic prices (I/O).
//
// Guarantees: load_network_dir(dir) reads intra_node_bandwidths.json and
//   gcp_communication_cost.json when present (each optional) on top of default_network_model().
#pragma once

#include <string>
#include <string_view>

#include "planner/network.h"
#include "planner/result.h"

namespace flotilla::planner {

Result<NetworkModel> parse_intra_node_fits(std::string_view json_text, NetworkModel base);
Result<NetworkModel> parse_zone_costs(std::string_view json_text, NetworkModel base);
Result<NetworkModel> load_network_dir(const std::string& dir);

}  // namespace flotilla::planner
