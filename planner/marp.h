// Frenzy's Memory-Aware Resource Predictor (MARP), exactly as written in frenzy.txt §IV.
//
// Guarantees: marp_weight_params() is Frenzy's W; marp_fits() is the test
//   20W/t + s*b*h*l*(10/d + 24/(d*t) + 5*a*s/(d*h*t)) < capacity (bytes);
//   marp_resource_plans() lists the (d, t) pairs that fit, ranked fewest GPUs first, then
//   smaller t (less communication), then larger headroom.
// Assumes: Frenzy's symbols: s sequence length, b the user's batch B (Frenzy splits it as
//   b = B/d, which is why the activation term divides by d), h hidden, l layers, a heads,
//   V vocabulary, d data-parallel and t tensor-parallel degrees.
// Caveats: MARP ignores 1F1B in-flight micro-batches and allocator overhead; it is the coarse
//   first filter. memory_model.h is the per-rank model used for decisions.
#pragma once

#include <cstdint>
#include <vector>

#include "planner/model_spec.h"

namespace flotilla::planner {

struct MarpInput {
  double s = 0, b = 0, h = 0, l = 0, a = 0, V = 0;
};

MarpInput marp_input(const ModelSpec& model, int batch_size);
double marp_weight_params(const MarpInput& in);                    // W
double marp_required_bytes(const MarpInput& in, int d, int t);     // left-hand side
bool marp_fits(const MarpInput& in, int d, int t, double capacity_bytes);

struct MarpPlan {
  int d = 1;
  int t = 1;
  int gpus = 1;
  double required_bytes = 0;
};
// All (d, t) with d*t <= max_gpus, d dividing b, t a power of two <= max_tp, that fit,
// ranked as above.
std::vector<MarpPlan> marp_resource_plans(const MarpInput& in, double capacity_bytes,
                                          int max_gpus, int max_tp);

}  // namespace flotilla::planner
