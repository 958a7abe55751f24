// Poisson-based benefit check for a scale-up (FlexTrain §5.1, eqs. 14-16).
//
// With speedup S (new throughput / current throughput) and restart overhead T_o, scaling pays
// off if the idle GPUs stay idle for T_avail > S/(S-1)·T_o (eq. 14 solved for T_avail). Job
// arrivals in the recent window are taken as a Poisson process of rate λ, so
// P(T_avail > x) = exp(-λ·x) (eq. 15), and we scale only if that probability exceeds P_th,
// i.e. λ·S/(S-1)·T_o < ln(1/P_th) (eq. 16).
//
// Guarantees: pure; every decision carries its inputs (λ, S, T_o) and the probability so that
//   status and metrics can explain it. S <= 1 never passes (there is nothing to gain).
// Caveats: λ = 0 (no recent large arrivals) always passes when S > 1.
#pragma once

#include <string>

namespace flotilla::scaler {

struct BenefitCheckParams {
  double threshold_probability = 0.6;  // P_th
};

struct BenefitDecision {
  double arrival_rate_per_s = 0;  // λ
  double speedup = 1;             // S
  double overhead_s = 0;          // T_overhead
  double required_idle_s = 0;     // S/(S-1)·T_overhead (infinite when S <= 1)
  double probability = 0;         // exp(-λ·required_idle_s)
  double threshold_probability = 0.6;
  bool scale_up = false;

  std::string explain() const;  // one line with all inputs, for status/metrics/logs
};

BenefitDecision check_benefit(double arrival_rate_per_s, double speedup, double overhead_s,
                              const BenefitCheckParams& params = {});

}  // namespace flotilla::scaler
