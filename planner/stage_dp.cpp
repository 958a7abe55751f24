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
  mem_start_.assign(buckets_, {});
  // The reference builds every row up front, as the first version did.
  for (int in_flight = 1; in_flight <= (in_.quadratic_reference ? buckets_ : 1); ++in_flight)
    build_memory_rows(in_flight);
}

// Rows are built per in-flight count when a depth first needs one: deep models have up to
// blocks buckets, but the DP rarely reaches more than a few dozen depths.
void StageDp::build_memory_rows(int in_flight) {
  std::vector<int>& rows = mem_start_[in_flight - 1];
  if (!rows.empty()) return;
  const int configs = static_cast<int>(in_.configs->size());
  rows.assign(static_cast<std::size_t>(configs) * (blocks_ + 1), 0);
  for (int c = 0; c < configs; ++c) {
    const StageConfig& config = (*in_.configs)[c];
    const GpuType& gpu = *(*in_.pools)[config.pool].gpu;
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
      rows[static_cast<std::size_t>(c) * (blocks_ + 1) + end] = start;
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
  level.first_finite.push_back(blocks_ + 1);
  level.last_finite.push_back(-1);
  ++states_;
  return id;
}

void StageDp::solve() {
  levels_.assign(1, Level{});
  std::vector<int> zero(pools_, 0);
  const int root = add_state(levels_[0], 0, zero.data());
  levels_[0].tau[static_cast<std::size_t>(root) * (blocks_ + 1) + blocks_] = 0.0f;
  levels_[0].first_finite[root] = levels_[0].last_finite[root] = blocks_;

  const int configs = static_cast<int>(in_.configs->size());
  const float limit = in_.max_stage_seconds >= 3e38 ? kInf : static_cast<float>(in_.max_stage_seconds);
  std::vector<int> next_usage(pools_);
  for (int depth = 0; depth < in_.max_stages; ++depth) {
    levels_.emplace_back();
    const Level& here = levels_[depth];
    Level& next = levels_[depth + 1];
    const int in_flight = std::min(depth + 1, buckets_);
    build_memory_rows(in_flight);
    const int states_here = static_cast<int>(here.keys.size());
    for (int s = 0; s < states_here; ++s) {
      const int* usage = &here.usage[static_cast<std::size_t>(s) * pools_];
      const float* tau = &here.tau[static_cast<std::size_t>(s) * (blocks_ + 1)];
      const int lo = here.first_finite[s], hi = here.last_finite[s];
      if (lo > hi) continue;  // no start block reached (every cell infinite)
      for (int c = 0; c < configs; ++c) {
        const StageConfig& config = (*in_.configs)[c];
        if (usage[config.pool] + config.tp > capacity_[config.pool]) continue;
        const std::vector<double>& prefix = (*in_.time_prefix)[c];
        const double p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];  // depth 0: last stage
        // The target state exists iff some end admits a stage (as the first version had it,
        // so state counts and the budget are unchanged).
        bool admits = false;
        const int from = in_.quadratic_reference ? 1 : std::max(1, lo);
        const int to = in_.quadratic_reference ? blocks_ : hi;
        for (int end = from; end <= to && !admits; ++end) {
          const float before = tau[end];
          if (before == kInf || before > limit) continue;
          if (mem_start(c, in_flight, end) >= end) continue;
          admits = static_cast<float>(prefix[end] + p2p - prefix[end - 1]) <= limit;
        }
        if (!admits) continue;
        const std::uint64_t key = here.keys[s] + config.tp * stride_[config.pool];
        int target;
        if (auto found = next.index.find(key); found != next.index.end()) {
          target = found->second;
        } else {
          if (states_ >= in_.max_states) {
            truncated_ = true;
            continue;
          }
          std::copy(usage, usage + pools_, next_usage.begin());
          next_usage[config.pool] += config.tp;
          target = add_state(next, key, next_usage.data());
        }
        if (in_.quadratic_reference)
          relax_quadratic(tau, c, in_flight, prefix, p2p, limit, next, target);
        else
          relax_linear(tau, std::max(1, lo), hi, c, in_flight, prefix, p2p, limit, next, target);
      }
    }
    if (next.keys.empty()) break;
  }
}

// The first version's sweep, O(blocks^2): every (end, start) pair. Kept as the reference the
// bench and the tests compare relax_linear() against (quadratic_reference).
void StageDp::relax_quadratic(const float* tau, int c, int in_flight, const std::vector<double>& prefix,
                              double p2p, float limit, Level& next, int target) {
  const std::size_t row = static_cast<std::size_t>(target) * (blocks_ + 1);
  float* best = &next.tau[row];
  for (int end = 1; end <= blocks_; ++end) {
    const float before = tau[end];
    if (before == kInf || before > limit) continue;
    const int lowest = mem_start(c, in_flight, end);
    if (lowest >= end) continue;
    const double end_time = prefix[end] + p2p;
    if (static_cast<float>(end_time - prefix[end - 1]) > limit) continue;
    for (int start = end - 1; start >= lowest; --start) {
      const float stage = static_cast<float>(end_time - prefix[start]);
      if (stage > limit) break;  // earlier starts only make the stage slower
      const float slowest = stage > before ? stage : before;
      if (slowest < best[start]) {
        best[start] = slowest;
        next.prev_block[row + start] = static_cast<std::int16_t>(end);
        next.config[row + start] = static_cast<std::int16_t>(c);
        next.first_finite[target] = std::min(next.first_finite[target], start);
        next.last_finite[target] = std::max(next.last_finite[target], start);
      }
    }
  }
}

// Same result as relax_quadratic(), cell for cell (value and chosen end), in O(blocks).
// For a start block, candidate ends run from start + 1 to hi(start), the last end whose stage
// from `start` still fits in memory. The value of an end is max(tau[end], S(end)) with S the
// stage's cycle, non-decreasing in end. Let m(end) = min of tau over (start, end]: then
// min_end max(tau, S) = min_end max(m, S), with m non-increasing and S non-decreasing, so the
// optimum sits where S first reaches m (the crossing p): either the smallest tau left of p
// (there S < tau, so the value is tau) or p itself. Left of p wins ties, and among equal tau
// the smallest end, which is the end the quadratic sweep keeps. As start decreases, S grows
// and m can only shrink, so p and hi never move right: the window (start, p) slides left and a
// monotone deque gives its minimum in amortised O(1).
void StageDp::relax_linear(const float* tau, int first_end, int last_end, int c, int in_flight,
                           const std::vector<double>& prefix, double p2p, float limit, Level& next,
                           int target) {
  const std::size_t row = static_cast<std::size_t>(target) * (blocks_ + 1);
  float* best = &next.tau[row];
  auto value_of = [&](int end) {  // tau past the bound never starts a stage (as the sweep)
    const float t = tau[end];
    return t > limit ? kInf : t;
  };
  auto stage_seconds = [&](int start, int end) {
    return static_cast<float>(prefix[end] + p2p - prefix[start]);
  };
  // Ends outside [first_end, last_end] have infinite tau: they can never be chosen, so the
  // sweep starts below last_end and stops once no end from first_end on can take the start.
  // window_ holds ends in (start, p), highest first, values strictly increasing front to back.
  window_.clear();
  std::size_t head = 0;  // window_[head..] is live; ends leave from the front
  int hi = last_end;     // last end that fits with the current start
  int p = last_end + 1;  // crossing: first end in (start, hi] where S >= m, else hi + 1
  const int lowest_start = mem_start(c, in_flight, first_end);
  for (int start = last_end - 1; start >= lowest_start; --start) {
    // Every end from first_end on makes the stage slower than the bound allows: done.
    if (stage_seconds(start, first_end) > limit) break;
    // hi only moves left; hi == start leaves no end for this start (a later one may fit).
    while (hi > start && mem_start(c, in_flight, hi) > start) --hi;
    // End start + 1 joins the window at its low side (p > start + 1 always holds here).
    const float joining = value_of(start + 1);
    while (window_.size() > head && value_of(window_.back()) >= joining) window_.pop_back();
    window_.push_back(start + 1);
    // Ends beyond hi are out; they sit at the window's high side.
    if (p > hi + 1) {
      p = hi + 1;
      while (window_.size() > head && window_[head] >= p) ++head;
    }
    // Move the crossing left while S(p - 1) >= min of the window (which includes p - 1).
    while (p - 1 > start && window_.size() > head &&
           stage_seconds(start, p - 1) >= value_of(window_[head])) {
      --p;
      while (window_.size() > head && window_[head] >= p) ++head;
    }
    float chosen = kInf;
    int chosen_end = -1;
    if (window_.size() > head) {
      chosen = value_of(window_[head]);
      chosen_end = window_[head];
    }
    if (p <= hi) {
      const float at_p = std::max(value_of(p), stage_seconds(start, p));
      if (at_p < chosen) {
        chosen = at_p;
        chosen_end = p;
      }
    }
    if (chosen_end < 0 || chosen > limit || !(chosen < best[start])) continue;
    best[start] = chosen;
    next.prev_block[row + start] = static_cast<std::int16_t>(chosen_end);
    next.config[row + start] = static_cast<std::int16_t>(c);
    next.first_finite[target] = std::min(next.first_finite[target], start);
    next.last_finite[target] = std::max(next.last_finite[target], start);
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
