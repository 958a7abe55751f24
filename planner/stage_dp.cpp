#include "planner/stage_dp.h"

#include <algorithm>
#include <limits>

#include "planner/memory_model.h"

namespace flotilla::planner {
namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}

StageDp::StageDp(const StageDpInput& input) : in_(input) {
  blocks_ = in_.model->num_blocks();
  pools_ = static_cast<int>(in_.pools->size());
  buckets_ = std::max(1, std::min(in_.max_stages, in_.num_micro_batches));
  int max_tp = 1;
  for (const StageConfig& c : *in_.configs) max_tp = std::max(max_tp, c.tp);
  stride_.assign(pools_, 1);
  capacity_.assign(pools_, 0);
  std::uint64_t stride = 1;
  for (int k = 0; k < pools_; ++k) {
    // More than max_stages * max_tp units can never be used, which also bounds the key.
    capacity_[k] = std::min((*in_.pools)[k].gpus / in_.dp, in_.max_stages * max_tp);
    stride_[k] = stride;
    stride *= static_cast<std::uint64_t>(capacity_[k] + 1);
  }
  build_memory_table();
}

void StageDp::build_memory_table() {
  const int configs = static_cast<int>(in_.configs->size());
  mem_start_.assign(static_cast<std::size_t>(configs) * buckets_ * (blocks_ + 1), 0);
  for (int c = 0; c < configs; ++c) {
    const StageConfig& config = (*in_.configs)[c];
    const GpuType& gpu = *(*in_.pools)[config.pool].gpu;
    for (int in_flight = 1; in_flight <= buckets_; ++in_flight) {
      StageShape shape;
      shape.tp = config.tp;
      shape.dp = in_.dp;
      shape.micro_batch_size = in_.micro_batch_size;
      shape.in_flight_micro_batches = in_flight;
      shape.options = options_on_gpu(*in_.training, gpu.supports_flash_attention);  // as evaluate()
      auto fits = [&](int first, int last) {
        shape.first_block = first;
        shape.last_block = last;
        const MemoryBreakdown memory = stage_memory(*in_.model, shape, *in_.memory_constants);
        return rank_peak_bytes(memory, gpu.runtime_overhead_bytes) <= gpu.memory_bytes;
      };
      // Smallest start block that fits, per end block; it never decreases as the end grows.
      int start = 0;
      for (int end = 1; end <= blocks_; ++end) {
        while (start < end && !fits(start, end)) ++start;
        mem_start_[(static_cast<std::size_t>(c) * buckets_ + (in_flight - 1)) * (blocks_ + 1) +
                   end] = start;
      }
    }
  }
}

bool StageDp::block_fits_somewhere(int block) const {
  for (int c = 0; c < static_cast<int>(in_.configs->size()); ++c) {
    if (mem_start(c, 1, block + 1) <= block) return true;
  }
  return false;
}

int StageDp::add_state(Level& level, std::uint64_t key, const int* usage) {
  const int id = static_cast<int>(level.keys.size());
  level.index.emplace(key, id);
  level.keys.push_back(key);
  level.usage.insert(level.usage.end(), usage, usage + pools_);
  level.tau.insert(level.tau.end(), blocks_ + 1, kInf);
  level.prev_block.insert(level.prev_block.end(), blocks_ + 1, -1);
  level.config.insert(level.config.end(), blocks_ + 1, -1);
  ++states_;
  return id;
}

void StageDp::solve() {
  levels_.assign(1, Level{});
  std::vector<int> zero(pools_, 0);
  const int root = add_state(levels_[0], 0, zero.data());
  levels_[0].tau[static_cast<std::size_t>(root) * (blocks_ + 1) + blocks_] = 0.0f;

  const int configs = static_cast<int>(in_.configs->size());
  const float limit = in_.max_stage_seconds >= 3e38 ? kInf : static_cast<float>(in_.max_stage_seconds);
  std::vector<int> next_usage(pools_);
  for (int depth = 0; depth < in_.max_stages; ++depth) {
    levels_.emplace_back();
    const Level& here = levels_[depth];
    Level& next = levels_[depth + 1];
    const int in_flight = std::min(depth + 1, buckets_);
    const int states_here = static_cast<int>(here.keys.size());
    for (int s = 0; s < states_here; ++s) {
      const int* usage = &here.usage[static_cast<std::size_t>(s) * pools_];
      const float* tau = &here.tau[static_cast<std::size_t>(s) * (blocks_ + 1)];
      for (int c = 0; c < configs; ++c) {
        const StageConfig& config = (*in_.configs)[c];
        if (usage[config.pool] + config.tp > capacity_[config.pool]) continue;
        const std::vector<double>& prefix = (*in_.time_prefix)[c];
        const double p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];  // depth 0: last stage
        int target = -1;
        for (int end = 1; end <= blocks_; ++end) {
          const float before = tau[end];
          if (before == kInf || before > limit) continue;
          const int lowest = mem_start(c, in_flight, end);
          if (lowest >= end) continue;
          const double end_time = prefix[end] + p2p;
          // The single-block stage is the fastest this end allows; past the bound, skip.
          if (static_cast<float>(end_time - prefix[end - 1]) > limit) continue;
          if (target < 0) {
            const std::uint64_t key = here.keys[s] + config.tp * stride_[config.pool];
            auto found = next.index.find(key);
            if (found != next.index.end()) {
              target = found->second;
            } else {
              if (states_ >= in_.max_states) {
                truncated_ = true;
                break;
              }
              std::copy(usage, usage + pools_, next_usage.begin());
              next_usage[config.pool] += config.tp;
              target = add_state(next, key, next_usage.data());
            }
          }
          const std::size_t row = static_cast<std::size_t>(target) * (blocks_ + 1);
          float* best = &next.tau[row];
          for (int start = end - 1; start >= lowest; --start) {
            const float stage = static_cast<float>(end_time - prefix[start]);
            if (stage > limit) break;  // earlier starts only make the stage slower
            const float slowest = stage > before ? stage : before;
            if (slowest < best[start]) {
              best[start] = slowest;
              next.prev_block[row + start] = static_cast<std::int16_t>(end);
              next.config[row + start] = static_cast<std::int16_t>(c);
            }
          }
        }
      }
    }
    if (next.keys.empty()) break;
  }
}

std::vector<StageChoice> StageDp::reconstruct(int depth, int state) const {
  std::vector<StageChoice> choices;
  int block = 0;
  std::vector<int> usage(levels_[depth].usage.begin() + static_cast<std::ptrdiff_t>(state) * pools_,
                         levels_[depth].usage.begin() + static_cast<std::ptrdiff_t>(state + 1) * pools_);
  for (int d = depth; d > 0; --d) {
    const Level& level = levels_[d];
    const std::size_t cell = static_cast<std::size_t>(state) * (blocks_ + 1) + block;
    const int end = level.prev_block[cell];
    const int c = level.config[cell];
    choices.push_back({block, end, c});
    const StageConfig& config = (*in_.configs)[c];
    usage[config.pool] -= config.tp;
    std::uint64_t key = 0;
    for (int k = 0; k < pools_; ++k) key += static_cast<std::uint64_t>(usage[k]) * stride_[k];
    state = levels_[d - 1].index.at(key);
    block = end;
  }
  return choices;
}

std::vector<DpCandidate> StageDp::candidates() const {
  std::vector<DpCandidate> out;
  for (int depth = 1; depth < static_cast<int>(levels_.size()); ++depth) {
    const Level& level = levels_[depth];
    for (int s = 0; s < static_cast<int>(level.keys.size()); ++s) {
      const float tau = level.tau[static_cast<std::size_t>(s) * (blocks_ + 1)];
      if (tau == kInf) continue;
      DpCandidate candidate;
      candidate.stages = depth;
      candidate.slowest_stage_seconds = tau;
      candidate.usage.assign(level.usage.begin() + static_cast<std::ptrdiff_t>(s) * pools_,
                             level.usage.begin() + static_cast<std::ptrdiff_t>(s + 1) * pools_);
      candidate.choices = reconstruct(depth, s);
      out.push_back(std::move(candidate));
    }
  }
  return out;
}

}  // namespace flotilla::planner
