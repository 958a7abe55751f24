// Flag parsing shared by `flotilla simulate` and `flotilla simulate availability` (the loop and
// its messages, numbers, the flags both take), and the entry point of the latter
// (cmd_simulate.cpp dispatches its first argument `availability`).
//
// Guarantees: parse_number accepts finite numbers only (strtod also reads "nan" and "inf",
//   which slip past every range check); parse_whole additionally a whole number in [lo, hi]
//   (casting a larger double to an integer is undefined behaviour).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"

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

// The flag loop both forms share. --help/-h prints `usage` (exit 0); --json sets `json`; each
// flag in `flags_with_value` hands its value to `take`, which returns "" or the line to print;
// any other word is refused. Returns the exit status to stop with (0 after help, 2 after a
// usage error, printed as "<command>: <line>"), or nullopt once every flag was taken.
inline std::optional<int> walk_simulate_flags(
    const std::vector<std::string>& args, const char* command, const char* usage,
    const std::vector<std::string>& flags_with_value, bool& json,
    const std::function<std::string(const std::string& flag, const std::string& value)>& take) {
  auto bad = [&](const std::string& line) { return usage_error(command, line); };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    if (std::find(flags_with_value.begin(), flags_with_value.end(), a) == flags_with_value.end())
      return bad("unknown option '" + a + "' (see --help)");
    if (i + 1 >= args.size()) return bad(a + " needs a value (see --help)");
    if (const std::string error = take(a, args[++i]); !error.empty()) return bad(error);
  }
  return std::nullopt;
}

// `flotilla simulate availability ...` (cmd_simulate_availability.cpp); args exclude the word
// `availability`. Exit status as every command: 0, 1 unusable input or data, 2 bad usage.
int run_simulate_availability(const std::vector<std::string>& args);

}  // namespace flotilla::cli
