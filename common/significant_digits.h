// A double as text with a chosen number of significant digits, as printf's "%.<digits>g".
// The worker's relaunch flags, the sidecar's worker arguments and messages, the planner's
// suggestions and the emulated-GPU environment all print numbers this one way.
//
// Guarantees: the same text as std::printf("%.*g", digits, value); pure, no locale beyond the C one.
// Caveats: 6 digits is plain "%g"; 17 round-trips any double exactly; fewer rounds (the caller
//   decides whether rounding is the point, as in the planner's suggestions, or a loss).
#pragma once

#include <cstdio>
#include <string>

namespace flotilla {

inline std::string significant_digits_text(double value, int digits) {
  char buffer[64];  // "%.17g" of any double needs at most 24 characters
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  return buffer;
}

}  // namespace flotilla
