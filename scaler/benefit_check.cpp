#include "scaler/benefit_check.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace flotilla::scaler {

BenefitDecision check_benefit(double arrival_rate_per_s, double speedup, double overhead_s,
                              const BenefitCheckParams& params) {
  BenefitDecision d;
  d.arrival_rate_per_s = arrival_rate_per_s;
  d.speedup = speedup;
  d.overhead_s = overhead_s;
  d.threshold_probability = params.threshold_probability;
  if (!(speedup > 1.0)) {
    d.required_idle_s = std::numeric_limits<double>::infinity();
    d.probability = 0.0;
    d.scale_up = false;
    return d;
  }
  d.required_idle_s = speedup / (speedup - 1.0) * overhead_s;
  const double exponent = arrival_rate_per_s * d.required_idle_s;
  d.probability = std::exp(-exponent);
  // Eq. 16 as written (strict inequality on the exponent), not a comparison of probabilities,
  // so that the decision matches the paper exactly at the boundary.
  d.scale_up = exponent < std::log(1.0 / params.threshold_probability);
  return d;
}

std::string BenefitDecision::explain() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s: lambda_per_h=%.4g speedup=%.4g overhead_s=%.4g required_idle_s=%.4g "
                "p_idle=%.4g p_th=%.4g",
                scale_up ? "scale-up" : "keep", arrival_rate_per_s * 3600.0, speedup, overhead_s,
                required_idle_s, probability, threshold_probability);
  return buf;
}

}  // namespace flotilla::scaler
