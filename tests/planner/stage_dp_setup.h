// Test support: a FLOP-estimate world and a stage DP built for one (mbs, D) the way search.cpp
// builds it (pools, configs, the proxy's prefix sums and p2p), for tests that drive StageDp; and
// the small Llama slice the search and plan-and-place tests share.
#pragma once

#include <utility>
#include <vector>

#include "planner/search.h"
#include "planner/search_proxy.h"
#include "planner/search_space.h"
#include "planner/stage_dp.h"

namespace flotilla::planner {

// The built-in GPU catalog (or the one given), FLOP-estimated compute, the default network.
struct World {
  GpuCatalog catalog = builtin_gpu_catalog();
  ComputeModel compute{nullptr};
  NetworkModel network = default_network_model();
  World() = default;
  explicit World(GpuCatalog gpu_catalog) : catalog(std::move(gpu_catalog)) {}
  EvalContext context() const {
    EvalContext c;
    c.catalog = &catalog;
    c.compute = &compute;
    c.network = &network;
    return c;
  }
};

// A 4-layer Llama-2-7B slice: 6 blocks, ~1.07 B parameters, ~19 GB of weights and optimizer
// state at 18 B/parameter: more than one V100-16 holds, so it needs a pipeline there.
inline ModelSpec small_llama() {
  ModelSpec model = *find_preset("llama-2-7b");
  model.name = "llama-2-7b-4l";
  model.num_layers = 4;
  return model;
}

struct DpSetup {
  std::vector<SearchPool> pools;
  std::vector<StageConfig> configs;
  StageDpTimes times;
  StageDpInput input;

  DpSetup(const SearchRequest& request, const EvalContext& context, int mbs, int dp, int max_stages) {
    pools = merged_pools(request, *context.catalog);
    configs = stage_configs(request, pools, dp);
    ProxyTimer timer(request, context, pools, mbs);
    times = stage_dp_times(timer, configs, dp);
    input = stage_dp_input(request, context, pools, configs, times, mbs, dp, max_stages);
  }
  DpSetup(const DpSetup&) = delete;  // input points into the members
  DpSetup& operator=(const DpSetup&) = delete;
};

}  // namespace flotilla::planner
