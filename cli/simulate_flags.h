// Number parsing shared by `flotilla simulate` and `flotilla simulate availability`, and the
// entry point of the latter (cmd_simulate.cpp dispatches its first argument `availability`).
//
// Guarantees: parse_number accepts finite numbers only (strtod also reads "nan" and "inf",
//   which slip past every range check); parse_whole additionally a whole number in [lo, hi]
//   (casting a larger double to an integer is undefined behaviour).
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace flotilla::cli {

inline bool parse_number(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && std::isfinite(out);
}

inline bool parse_whole(const std::string& s, double lo, double hi, double& out) {
  return parse_number(s, out) && out == std::floor(out) && out >= lo && out <= hi;
}

// `flotilla simulate availability ...` (cmd_simulate_availability.cpp); args exclude the word
// `availability`. Exit status as every command: 0, 1 unusable input or data, 2 bad usage.
int run_simulate_availability(const std::vector<std::string>& args);

}  // namespace flotilla::cli
