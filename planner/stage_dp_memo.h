// Remembers solved stage-DP runs by everything the DP reads, so that a run whose inputs are
// identical to an earlier one's takes its outcome instead of solving again.
//
// Guarantees: recall() returns an outcome only for inputs equal to a remembered run's in every
//   field StageDp reads: the scalars of StageDpInput (micro-batch size, D, micro-batches,
//   depth, bound, state budgets, beam width, reference switches, positions), the same model,
//   training options and memory constants (by address), the configs, time prefixes and p2p
//   seconds (by value), and per pool its GPU type (field by field), GPUs and GPUs per region.
//   Pool names, regions and zones are not compared: the DP never reads them (regions only as
//   capacities). So the recalled outcome is the one solve() would return, state for state.
// Assumes: the remembered inputs' model, training options and memory constants outlive the
//   memo and are not changed (search.cpp keeps one request for all mixed-type passes).
// Caveats: a linear scan with cheap scalar checks first; meant for the few dozen runs of a
//   search's mixed-type passes (on 14,336 GPUs the passes in two one-zone regions with the
//   same pools solve the same runs). If StageDp ever reads another pool field, same_inputs()
//   must compare it (StageDpMemoTest checks that a differing capacity misses).
#pragma once

#include <memory>
#include <vector>

#include "planner/stage_dp.h"

namespace flotilla::planner {

class StageDpMemo {
 public:
  // The outcome of a remembered run with the same inputs, or nullptr.
  std::shared_ptr<const StageDp::Outcome> recall(const StageDpInput& input) const;
  // Remembers what a run on `input` found.
  void remember(const StageDpInput& input, std::shared_ptr<const StageDp::Outcome> outcome);
  // Solves `solver` (built from `input`), or adopts an identical run's outcome; true when
  // recalled.
  bool solve(const StageDpInput& input, StageDp& solver);

 private:
  // The DP's inputs by value (the pointers' targets that differ between passes).
  struct Key {
    StageDpInput input;  // scalars; model, training and memory constants by address
    std::vector<GpuType> gpus;
    std::vector<int> pool_gpus;
    std::vector<std::vector<int>> region_gpus;
    std::vector<StageConfig> configs;
    std::vector<std::vector<double>> time_prefix;
    std::vector<double> p2p_cycle_seconds;
  };
  static bool same_inputs(const Key& key, const StageDpInput& input);
  std::vector<std::pair<Key, std::shared_ptr<const StageDp::Outcome>>> runs_;
};

}  // namespace flotilla::planner
