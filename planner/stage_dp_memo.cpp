#include "planner/stage_dp_memo.h"

namespace flotilla::planner {

bool StageDpMemo::same_inputs(const Key& key, const StageDpInput& input) {
  const StageDpInput& a = key.input;
  if (a.model != input.model || a.training != input.training || a.memory_constants != input.memory_constants ||
      a.micro_batch_size != input.micro_batch_size || a.dp != input.dp ||
      a.num_micro_batches != input.num_micro_batches || a.max_stages != input.max_stages ||
      a.max_stage_seconds != input.max_stage_seconds || a.max_states != input.max_states ||
      a.stop_when_truncated != input.stop_when_truncated || a.max_states_per_depth != input.max_states_per_depth ||
      a.eager_beam_reference != input.eager_beam_reference || a.quadratic_reference != input.quadratic_reference ||
      a.window_sweep_reference != input.window_sweep_reference || a.max_units != input.max_units)
    return false;
  const std::vector<SearchPool>& pools = *input.pools;
  if (pools.size() != key.gpus.size() || input.configs->size() != key.configs.size()) return false;
  for (std::size_t k = 0; k < pools.size(); ++k) {
    if (pools[k].gpus != key.pool_gpus[k] || pools[k].region_gpus != key.region_gpus[k] ||
        !(*pools[k].gpu == key.gpus[k]))
      return false;
  }
  for (std::size_t c = 0; c < key.configs.size(); ++c) {
    const StageConfig& config = (*input.configs)[c];
    if (config.pool != key.configs[c].pool || config.tp != key.configs[c].tp) return false;
  }
  return *input.p2p_cycle_seconds == key.p2p_cycle_seconds && *input.time_prefix == key.time_prefix;
}

std::shared_ptr<const StageDp::Outcome> StageDpMemo::recall(const StageDpInput& input) const {
  for (const auto& [key, outcome] : runs_)
    if (same_inputs(key, input)) return outcome;
  return nullptr;
}

void StageDpMemo::remember(const StageDpInput& input, std::shared_ptr<const StageDp::Outcome> outcome) {
  Key key;
  key.input = input;
  key.input.pools = nullptr;
  key.input.configs = nullptr;
  key.input.time_prefix = nullptr;
  key.input.p2p_cycle_seconds = nullptr;
  for (const SearchPool& pool : *input.pools) {
    key.gpus.push_back(*pool.gpu);
    key.pool_gpus.push_back(pool.gpus);
    key.region_gpus.push_back(pool.region_gpus);
  }
  key.configs = *input.configs;
  key.time_prefix = *input.time_prefix;
  key.p2p_cycle_seconds = *input.p2p_cycle_seconds;
  runs_.emplace_back(std::move(key), std::move(outcome));
}

bool StageDpMemo::solve(const StageDpInput& input, StageDp& solver) {
  if (std::shared_ptr<const StageDp::Outcome> outcome = recall(input)) {
    solver.adopt(std::move(outcome));
    return true;
  }
  solver.solve();
  // The solver answers from the remembered outcome too, so its candidates are reconstructed once.
  auto outcome = std::make_shared<const StageDp::Outcome>(solver.outcome());
  remember(input, outcome);
  solver.adopt(std::move(outcome));
  return false;
}

}  // namespace flotilla::planner
