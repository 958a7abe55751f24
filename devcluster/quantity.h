// Kubernetes resource quantities ("4", "500m", "1Gi", "1e3", "99999999999999999999") as numbers,
// for validating resource limits and for the scheduler's GPU counts.
//
// Guarantees: parse_quantity() accepts exactly kube's syntax
//   ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$ with its suffixes (n u m k M G T P E, Ki..Ei,
//   and a decimal exponent) and returns nullopt for anything else; values are long doubles, so
//   huge quantities stay huge (never wrap, never become 0). saturated_count() clamps to
//   [0, INT_MAX], so "99999999999999999999" GPUs is more than any node has.
// Assumes: nothing; pure functions.
// Caveats: long double precision (64-bit mantissa): integer-ness of values above 2^63 is
//   approximate, which is fine for the checks made with it (>= 0, whole number, fits a node).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string_view>

namespace flotilla::devcluster {

std::optional<long double> parse_quantity(std::string_view text);
// A JSON quantity: a string in the syntax above or a JSON number; nullopt otherwise.
std::optional<long double> quantity_value(const nlohmann::json& value);
// Whole units clamped to [0, INT_MAX] (fractions round up, as a request for 0.5 GPU needs one).
int saturated_count(long double value);

}  // namespace flotilla::devcluster
