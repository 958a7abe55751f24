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

// The flags both forms share. Each returns "" and sets `out`, or the one-line error to print.
inline std::string parse_p_th(const std::string& v, double& out) {
  if (!parse_number(v, out) || out <= 0 || out >= 1) return "--p-th must be in (0, 1)";
  return {};
}

// Hours in, seconds out; 1e308 hours passes as a number but is infinite in seconds.
inline std::string parse_window_h(const std::string& v, double& window_s) {
  double h = 0;
  if (!parse_number(v, h) || h <= 0 || !std::isfinite(h * 3600))
    return "--window-h must be a number of hours > 0, got '" + v + "'";
  window_s = h * 3600;
  return {};
}

inline std::string parse_consistency(const std::string& v, bool& strict) {
  if (v != "strict" && v != "relaxed") return "--consistency is strict or relaxed";
  strict = v == "strict";
  return {};
}

// `flotilla simulate availability ...` (cmd_simulate_availability.cpp); args exclude the word
// `availability`. Exit status as every command: 0, 1 unusable input or data, 2 bad usage.
int run_simulate_availability(const std::vector<std::string>& args);

}  // namespace flotilla::cli
