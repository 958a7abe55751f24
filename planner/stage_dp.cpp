#include "planner/stage_dp.h"

#include "planner/runtime_overhead.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "planner/memory_model.h"

namespace flotilla::planner {
namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kNoEnd = std::numeric_limits<double>::infinity();

// One min-max transition: for every start block, best[start] = min over ends of
// max(tau[end], stage cycle from start to end), over the ends whose stage fits in memory.
struct Relax {
  const float* tau = nullptr;  // source state's best slowest cycle per end
  int first_end = 1, last_end = 0;  // tau is infinite outside [first_end, last_end]
  int positions = 0;           // blocks (or units) in the model
  const double* prefix = nullptr;
  double p2p = 0;
  const double* end_time = nullptr;  // prefix[end] + p2p per end (relax_nonincreasing() only)
  float limit = kInf;
  const int* mem_start = nullptr;  // per end: smallest start whose stage fits
  float* best = nullptr;
  std::int16_t* best_end = nullptr;
  std::int16_t* best_config = nullptr;
  int config = 0;
  int* first_finite = nullptr;  // target's range of finite starts, widened on writes
  int* last_finite = nullptr;
  void keep(int start, float value, int end) const {
    best[start] = value;
    best_end[start] = static_cast<std::int16_t>(end);
    best_config[start] = static_cast<std::int16_t>(config);
    *first_finite = std::min(*first_finite, start);
    *last_finite = std::max(*last_finite, start);
  }
};

// The first version's sweep, O(blocks^2): every (end, start) pair. Kept as the reference the
// bench and the tests compare relax_linear() against (quadratic_reference).
void relax_quadratic(const Relax& r) {
  for (int end = 1; end <= r.positions; ++end) {
    const float before = r.tau[end];
    if (before == kInf || before > r.limit) continue;
    const int lowest = r.mem_start[end];
    if (lowest >= end) continue;
    const double end_time = r.prefix[end] + r.p2p;
    if (static_cast<float>(end_time - r.prefix[end - 1]) > r.limit) continue;
    for (int start = end - 1; start >= lowest; --start) {
      const float stage = static_cast<float>(end_time - r.prefix[start]);
      if (stage > r.limit) break;  // earlier starts only make the stage slower
      const float slowest = stage > before ? stage : before;
      if (slowest < r.best[start]) r.keep(start, slowest, end);
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
// monotone deque gives its minimum in amortised O(1). The same float expressions as the sweep
// are compared, so even rounding agrees.
// The lowest start the sweep visits: below it no end from first_end on can take the start,
// because the stage to first_end no longer fits in memory (mem_start) or exceeds the bound (the
// stage only grows as start decreases, so that is one binary search, not a test per start).
// Returns last_end when no start qualifies.
int lowest_sweep_start(const Relax& r) {
  auto stage_seconds = [&](int start) { return static_cast<float>(r.prefix[r.first_end] + r.p2p - r.prefix[start]); };
  int lowest = r.mem_start[r.first_end];
  if (r.limit == kInf || lowest >= r.last_end || !(stage_seconds(lowest) > r.limit)) return lowest;
  if (stage_seconds(r.last_end - 1) > r.limit) return r.last_end;
  int fits = r.last_end - 1;  // invariant: `lowest` exceeds the bound, `fits` does not
  while (fits - lowest > 1) {
    const int mid = lowest + (fits - lowest) / 2;
    if (stage_seconds(mid) > r.limit) lowest = mid;
    else fits = mid;
  }
  return fits;
}

void relax_linear(const Relax& r, std::vector<int>& window_storage) {
  const float* tau = r.tau;
  const float limit = r.limit;
  auto value_of = [&](int end) {  // tau past the bound never starts a stage (as the sweep)
    const float t = tau[end];
    return t > limit ? kInf : t;
  };
  const double* prefix = r.prefix;
  const double p2p = r.p2p;
  auto stage_seconds = [&](int start, int end) { return static_cast<float>(prefix[end] + p2p - prefix[start]); };
  // Ends outside [first_end, last_end] have infinite tau: they can never be chosen, so the
  // sweep starts below last_end and stops at lowest_sweep_start().
  const int lowest_start = lowest_sweep_start(r);
  // window holds ends in (start, p), highest first, values strictly increasing front to back.
  window_storage.resize(static_cast<std::size_t>(r.last_end) + 2);
  int* window = window_storage.data();
  int head = 0, tail = 0;  // window[head, tail) is live; ends leave from the front
  int hi = r.last_end;     // last end that fits with the current start
  int p = r.last_end + 1;  // crossing: first end in (start, hi] where S >= m, else hi + 1
  for (int start = r.last_end - 1; start >= lowest_start; --start) {
    // hi only moves left; hi == start leaves no end for this start (a later one may fit).
    while (hi > start && r.mem_start[hi] > start) --hi;
    // End start + 1 joins the window at its low side (p > start + 1 always holds here).
    const float joining = value_of(start + 1);
    while (tail > head && value_of(window[tail - 1]) >= joining) --tail;
    window[tail++] = start + 1;
    // Ends beyond hi are out; they sit at the window's high side.
    if (p > hi + 1) {
      p = hi + 1;
      while (tail > head && window[head] >= p) ++head;
    }
    // Move the crossing left while S(p - 1) >= min of the window (which includes p - 1).
    while (p - 1 > start && tail > head && stage_seconds(start, p - 1) >= value_of(window[head])) {
      --p;
      while (tail > head && window[head] >= p) ++head;
    }
    float chosen = kInf;
    int chosen_end = -1;
    if (tail > head) {
      chosen_end = window[head];
      chosen = value_of(chosen_end);
    }
    if (p <= hi) {
      const float at_p = std::max(value_of(p), stage_seconds(start, p));
      if (at_p < chosen) {
        chosen = at_p;
        chosen_end = p;
      }
    }
    if (chosen_end < 0 || chosen > limit || !(chosen < r.best[start])) continue;
    r.keep(start, chosen, chosen_end);
  }
}

// relax_linear()'s result, cell for cell, when tau never increases over [first_end, last_end]
// (a suffix that covers fewer blocks is no slower: every row of the 14,336-GPU beams). Then the
// value max(tau[end], S(end)) falls while tau dominates and rises once S does, so the optimum is
// at the crossing c, the first end where S(c) >= tau[c]: tau[c - 1] (at the first end of its run
// of equal values, the smallest end, as the sweep breaks ties) or S(c). As start decreases S
// grows, so c only moves left: one pointer, no window. `run_start[e]`: the first end of the run
// of equal tau values that holds e.
void relax_nonincreasing(const Relax& r, const std::int16_t* run_start) {
  // Every field in a local: the stores into the target row could otherwise alias r's fields
  // (first_finite is an int*, best a float*), and the compiler reloaded them per start.
  const float* const tau = r.tau;
  const double* const prefix = r.prefix;
  const double* const end_time = r.end_time;  // prefix[end] + p2p: the same double as the sweep's sum
  const int* const mem_start = r.mem_start;
  float* const best = r.best;
  std::int16_t* const best_end = r.best_end;
  std::int16_t* const best_config = r.best_config;
  const auto config = static_cast<std::int16_t>(r.config);
  const float limit = r.limit;
  const int first_end = r.first_end;
  int first_kept = *r.first_finite, last_kept = *r.last_finite;
  const int lowest_start = lowest_sweep_start(r);
  int hi = r.last_end;      // last end that fits with the current start
  int c = r.last_end + 1;   // crossing: first end in [a, hi] with S >= tau, else hi + 1
  for (int start = r.last_end - 1; start >= lowest_start; --start) {
    while (hi > start && mem_start[hi] > start) --hi;
    const int a = std::max(start + 1, first_end);  // lowest end with a finite tau
    if (c > hi + 1) c = hi + 1;
    if (hi < a) continue;
    const double from = prefix[start];
    // As stage_seconds() elsewhere: float(prefix[end] + p2p - prefix[start]).
    while (c - 1 >= a && static_cast<float>(end_time[c - 1] - from) >= tau[c - 1]) --c;
    float chosen = kInf;
    int chosen_end = -1;
    if (c > a) {
      chosen = tau[c - 1];
      chosen_end = std::max<int>(run_start[c - 1], a);
    }
    if (c <= hi) {
      const float at_c = static_cast<float>(end_time[c] - from);
      if (at_c < chosen) {
        chosen = at_c;
        chosen_end = c;
      }
    }
    if (chosen_end < 0 || chosen > limit || !(chosen < best[start])) continue;
    best[start] = chosen;
    best_end[start] = static_cast<std::int16_t>(chosen_end);
    best_config[start] = config;
    first_kept = std::min(first_kept, start);
    last_kept = std::max(last_kept, start);
  }
  *r.first_finite = first_kept;
  *r.last_finite = last_kept;
}

}  // namespace

StageDp::StageDp(const StageDpInput& input) : in_(input) {
  fine_blocks_ = in_.model->num_blocks();
  // DP positions: one per block, or, past max_units, the embedding, runs of `group` layers
  // and the head (the last run may be shorter).
  const int layers = fine_blocks_ - 2;
  group_ = 1;
  if (in_.max_units > 2 && fine_blocks_ > in_.max_units)
    group_ = (layers + (in_.max_units - 2) - 1) / (in_.max_units - 2);
  bounds_.push_back(0);
  if (group_ == 1) {
    for (int b = 1; b <= fine_blocks_; ++b) bounds_.push_back(b);
  } else {
    for (int b = 1; b <= layers; b += group_) bounds_.push_back(b);
    bounds_.push_back(layers + 1);
    bounds_.push_back(fine_blocks_);
  }
  blocks_ = static_cast<int>(bounds_.size()) - 1;
  for (const std::vector<double>& fine : *in_.time_prefix) {
    std::vector<double> sampled(blocks_ + 1);
    for (int u = 0; u <= blocks_; ++u) sampled[u] = fine[bounds_[u]];
    unit_prefix_.push_back(std::move(sampled));
  }
  pools_ = static_cast<int>(in_.pools->size());
  buckets_ = std::max(1, std::min(in_.max_stages, in_.num_micro_batches));
  int max_tp = 1;
  for (const StageConfig& c : *in_.configs) max_tp = std::max(max_tp, c.tp);
  // Usage dimensions: one per pool (its TP units), then, for a pool grouped across regions,
  // one per TP level s > 1 whose bound binds: the units of its stages of TP >= s, which must
  // stay within what the regions hold in whole groups of s (search_space.h, stage_units()).
  // With power-of-two TP degrees that makes "each stage in one region" exact whatever the order
  // the DP adds stages in, and one-region pools get no extra dimension.
  std::vector<std::pair<int, int>> dims;  // (pool, level); level 1 = the pool's own entry
  for (int k = 0; k < pools_; ++k) dims.push_back({k, 1});
  for (int k = 0; k < pools_; ++k) {
    const SearchPool& pool = (*in_.pools)[k];
    if (pool.region_gpus.empty()) continue;
    const int whole = std::min(stage_units(pool, in_.dp, 1), in_.max_stages * max_tp);
    for (int level = 2; level <= max_tp; level *= 2)
      if (stage_units(pool, in_.dp, level) < whole) dims.push_back({k, level});
  }
  dims_ = static_cast<int>(dims.size());
  stride_.assign(dims_, 1);
  capacity_.assign(dims_, 0);
  std::uint64_t stride = 1;
  for (int d = 0; d < dims_; ++d) {
    const auto [k, level] = dims[d];
    // More than max_stages * max_tp units can never be used, which also bounds the key.
    capacity_[d] = std::min(stage_units((*in_.pools)[k], in_.dp, level), in_.max_stages * max_tp);
    stride_[d] = stride;
    stride *= static_cast<std::uint64_t>(capacity_[d] + 1);
  }
  // Per config: the dimensions a stage of it adds its TP to, and the key step that makes.
  config_dims_.resize(in_.configs->size());
  config_key_step_.assign(in_.configs->size(), 0);
  for (std::size_t c = 0; c < in_.configs->size(); ++c) {
    const StageConfig& config = (*in_.configs)[c];
    for (int d = 0; d < dims_; ++d) {
      if (dims[d].first != config.pool || dims[d].second > config.tp) continue;
      config_dims_[c].push_back(d);
      config_key_step_[c] += static_cast<std::uint64_t>(config.tp) * stride_[d];
    }
  }
  mem_start_.assign(buckets_, {});
  // The reference builds every row up front, as the first version did.
  for (int in_flight = 1; in_flight <= (in_.quadratic_reference ? buckets_ : 1); ++in_flight)
    build_memory_rows(in_flight);
}

// Smallest start position that fits, per end position, for positions `bounds` (block of
// each position boundary); it never decreases as the end grows (two pointers, O(positions)).
// `floor` (may be null): the row of the same config with fewer micro-batches in flight. A stage
// holds in_flight x its per-micro-batch activations and nothing else grows with in_flight, so a
// start that did not fit there does not fit here: the pointer starts at floor[end] instead of
// testing those starts again (about half of stage_memory()'s calls).
void StageDp::memory_row(int c, int in_flight, const std::vector<int>& bounds, const int* floor, int* row) const {
  const StageConfig& config = (*in_.configs)[c];
  const GpuType& gpu = *(*in_.pools)[config.pool].gpu;
  StageShape shape;
  shape.tp = config.tp;
  shape.dp = in_.dp;
  shape.micro_batch_size = in_.micro_batch_size;
  shape.in_flight_micro_batches = in_flight;
  shape.options = options_on_gpu(*in_.training, gpu.supports_flash_attention);  // as evaluate()
  auto fits = [&](int first, int last) {
    shape.first_block = bounds[first];
    shape.last_block = bounds[last];
    const MemoryBreakdown memory = stage_memory(*in_.model, shape, *in_.memory_constants);
    const RuntimeOverhead runtime = runtime_overhead(
        gpu, stage_communicators(shape.first_block, shape.last_block, in_.model->num_blocks(), shape.tp, shape.dp,
                                   gpu.gpus_per_node));
    return rank_peak_bytes(memory, runtime.total_bytes()) <= gpu.memory_bytes;
  };
  const int positions = static_cast<int>(bounds.size()) - 1;
  row[0] = 0;
  int start = 0;
  for (int end = 1; end <= positions; ++end) {
    if (floor != nullptr) start = std::max(start, floor[end]);
    while (start < end && !fits(start, end)) ++start;
    row[end] = start;
  }
}

// Rows are built per in-flight count when a depth first needs one: deep models have up to
// blocks buckets, but the DP rarely reaches more than a few dozen depths.
void StageDp::build_memory_rows(int in_flight) {
  std::vector<int>& rows = mem_start_[in_flight - 1];
  if (!rows.empty()) return;
  const int configs = static_cast<int>(in_.configs->size());
  rows.assign(static_cast<std::size_t>(configs) * (blocks_ + 1), 0);
  // The nearest built row set with fewer in flight; none for the quadratic reference, which
  // tests every start so LinearSweepEqualsQuadraticSweep also checks the floor.
  const std::vector<int>* fewer = nullptr;
  for (int k = in_flight - 1; k >= 1 && fewer == nullptr && !in_.quadratic_reference; --k)
    if (!mem_start_[k - 1].empty()) fewer = &mem_start_[k - 1];
  for (int c = 0; c < configs; ++c) {
    const std::size_t row = static_cast<std::size_t>(c) * (blocks_ + 1);
    memory_row(c, in_flight, bounds_, fewer != nullptr ? &(*fewer)[row] : nullptr, &rows[row]);
  }
}

void StageDp::reuse_memory_rows(const StageDp& other) {
  const StageDpInput& a = in_;
  const StageDpInput& b = other.in_;
  if (a.model != b.model || a.training != b.training || a.pools != b.pools || a.configs != b.configs ||
      a.memory_constants != b.memory_constants || a.micro_batch_size != b.micro_batch_size || a.dp != b.dp ||
      bounds_ != other.bounds_ || mem_start_.size() != other.mem_start_.size())
    return;
  mem_start_ = other.mem_start_;
  fine_mem_start_ = other.fine_mem_start_;
}

// Per block, for the refinement and H2 when positions group layers.
const int* StageDp::fine_memory_row(int c, int in_flight) {
  if (group_ == 1) {
    build_memory_rows(in_flight);
    return &mem_start_[in_flight - 1][static_cast<std::size_t>(c) * (blocks_ + 1)];
  }
  std::vector<int>& row = fine_mem_start_[{c, in_flight}];
  if (row.empty()) {
    std::vector<int> identity(fine_blocks_ + 1);
    for (int b = 0; b <= fine_blocks_; ++b) identity[b] = b;
    row.resize(fine_blocks_ + 1);
    memory_row(c, in_flight, identity, nullptr, row.data());
  }
  return row.data();
}

bool StageDp::block_fits_somewhere(int block) {
  for (int c = 0; c < static_cast<int>(in_.configs->size()); ++c) {
    if (fine_memory_row(c, 1)[block + 1] <= block) return true;
  }
  return false;
}
// The relaxation: cost[s] = the least weighted usage of a suffix pipeline of `depth` stages
// covering blocks [s, blocks), every stage fitting memory at its in-flight count and within the
// time bound, as solve() admits them. A stage of config c from s may end at any e in (s, hi(s)],
// hi(s) the last end that fits both (each is monotone), and hi never moves right as s moves
// left, so a sliding-window minimum gives each cell in amortised O(1). Any pipeline solve()
// completes uses at most capacity_ units per pool, so its weighted usage is within the budget;
// if no depth has a complete pipeline within it, solve() has none either.
bool StageDp::cannot_complete() {
  const int configs = static_cast<int>(in_.configs->size());
  const float limit = in_.max_stage_seconds >= 3e38 ? kInf : static_cast<float>(in_.max_stage_seconds);
  constexpr double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> cost(blocks_ + 1), next(blocks_ + 1);
  std::vector<int> window(blocks_ + 1);
  // Two weightings: TP units (catches too few GPUs) and GPU memory (too little memory; more
  // weightings, e.g. memory squared or 1 / capacity, ruled out nothing more on 14,336 GPUs).
  for (int weighting = 0; weighting < 2; ++weighting) {
    const auto weight_of_pool = [&](int k) {
      return weighting == 0 ? 1.0 : static_cast<double>((*in_.pools)[k].gpu->memory_bytes);
    };
    double budget = 0;
    for (int k = 0; k < pools_; ++k) budget += capacity_[k] * weight_of_pool(k);  // dims 0..pools_-1
    budget *= 1 + 1e-12;
    std::fill(cost.begin(), cost.end(), kNone);
    cost[blocks_] = 0;
    bool feasible = false;
    for (int depth = 0; depth < in_.max_stages && !feasible; ++depth) {
      const int in_flight = std::min(depth + 1, buckets_);
      build_memory_rows(in_flight);
      std::fill(next.begin(), next.end(), kNone);
      for (int c = 0; c < configs; ++c) {
        const StageConfig& config = (*in_.configs)[c];
        const double weight = config.tp * weight_of_pool(config.pool);
        const double* prefix = unit_prefix_[c].data();
        const double p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];
        const int* mem = &mem_start_[in_flight - 1][static_cast<std::size_t>(c) * (blocks_ + 1)];
        std::size_t head = 0, tail = 0;  // window[head, tail): ends, largest first, cost increasing
        int hi = blocks_;
        for (int start = blocks_ - 1; start >= 0; --start) {
          while (hi > start && (mem[hi] > start || static_cast<float>(prefix[hi] + p2p - prefix[start]) > limit)) --hi;
          while (tail > head && cost[window[tail - 1]] >= cost[start + 1]) --tail;
          window[tail++] = start + 1;
          while (tail > head && window[head] > hi) ++head;
          if (tail > head && cost[window[head]] < kNone)
            next[start] = std::min(next[start], weight + cost[window[head]]);
        }
      }
      if (next[0] <= budget) feasible = true;
      bool any = false;
      for (int b = 1; b <= blocks_ && !any; ++b) any = next[b] <= budget;
      if (!any && !feasible) break;  // no deeper pipeline can come in within the budget
      std::swap(cost, next);
    }
    if (!feasible) return true;
  }
  return false;
}

void StageDp::StateIndex::clear(std::size_t expected) {
  std::size_t capacity = 64;
  while (capacity < 2 * expected) capacity *= 2;
  keys_.assign(capacity, 0);
  ids_.assign(capacity, -1);
  size_ = 0;
}

std::size_t StageDp::StateIndex::slot_of(std::uint64_t key) const {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & (keys_.size() - 1);
}

int StageDp::StateIndex::find_or_slot(std::uint64_t key, std::size_t& slot) {
  if (2 * (size_ + 1) > keys_.size()) grow();  // keep the load at most 1/2
  for (slot = slot_of(key); ids_[slot] >= 0; slot = (slot + 1) & (keys_.size() - 1))
    if (keys_[slot] == key) return ids_[slot];
  return -1;
}

void StageDp::StateIndex::add_at(std::size_t slot, std::uint64_t key, int id) {
  keys_[slot] = key;
  ids_[slot] = id;
  ++size_;
}

void StageDp::StateIndex::grow() {
  std::vector<std::uint64_t> keys = std::move(keys_);
  std::vector<int> ids = std::move(ids_);
  keys_.assign(keys.size() * 2, 0);
  ids_.assign(keys.size() * 2, -1);
  size_ = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (ids[i] < 0) continue;
    std::size_t slot = slot_of(keys[i]);
    while (ids_[slot] >= 0) slot = (slot + 1) & (keys_.size() - 1);
    add_at(slot, keys[i], ids[i]);
  }
}

// A state's key, usage and finite range; its rows (tau, ends, configs) are allocated per depth
// once the states of that depth are known (allocate_rows(), or the beam's own arena).
int StageDp::add_state(Level& level, std::uint64_t key, const int* usage) {
  const int id = static_cast<int>(level.keys.size());
  level.keys.push_back(key);
  level.usage.insert(level.usage.end(), usage, usage + dims_);
  level.first_finite.push_back(blocks_ + 1);
  level.last_finite.push_back(-1);
  ++states_;
  return id;
}

void StageDp::allocate_rows(Level& level) const {
  const std::size_t cells = static_cast<std::size_t>(level.keys.size()) * (blocks_ + 1);
  level.tau.assign(cells, kInf);
  level.prev_block.assign(cells, -1);
  level.config.assign(cells, -1);
  level.parent.assign(level.keys.size() * in_.configs->size(), -1);
}

// Per config, per end block e at this depth: +inf when no stage of that config can end at e
// (the single block before e does not fit in memory, or alone exceeds the bound), else a lower
// bound on what any stage of it ending at e adds to a beam score (beam_score()): its cycle is
// at least the single block's, and it starts at mem_start(e) or later, so the blocks still to
// place before it take at least fastest[mem_start(e)] / stages left. One row per config.
void StageDp::build_end_rows(int depth, int in_flight, float limit) {
  const int configs = static_cast<int>(in_.configs->size());
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  const double stages_left = std::max(1, in_.max_stages - depth - 1);  // as the child level's score
  end_rows_.assign(static_cast<std::size_t>(configs) * cells, kInf);
  end_time_.resize(static_cast<std::size_t>(configs) * cells);
  for (int c = 0; c < configs; ++c) {
    const double* prefix = unit_prefix_[c].data();
    const double p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];
    float* row = &end_rows_[static_cast<std::size_t>(c) * cells];
    for (std::size_t end = 0; end < cells; ++end) end_time_[static_cast<std::size_t>(c) * cells + end] = prefix[end] + p2p;
    for (int end = 1; end <= blocks_; ++end) {
      const int lowest = mem_start(c, in_flight, end);
      if (lowest >= end) continue;
      const float single = static_cast<float>(prefix[end] + p2p - prefix[end - 1]);
      if (single > limit) continue;
      // As a float rounded down, so that the bound stays below the double score.
      const double spread = fastest_prefix_[lowest] / stages_left;
      float spread_down = static_cast<float>(spread);
      if (static_cast<double>(spread_down) > spread) spread_down = std::nextafter(spread_down, 0.0f);
      row[end] = std::max(single, spread_down);
    }
  }
}

// The beam's score of a state: a lower bound on the slowest cycle of any pipeline it can
// finish. A state covers blocks [start, end) with slowest cycle tau[start]; the blocks before
// start still need at least fastest_prefix[start] / (stages left) on the fastest config, so
// the score is max(tau[start], that), minimised over start.
// `spread[b]` is fastest_prefix[b] / stages left, divided once per depth (keep_best_states()).
double StageDp::beam_score(const float* tau, int first, int last, const double* spread) {
  double best = kNoEnd;
  for (int b = first; b <= last; ++b) {
    if (tau[b] == kInf) continue;
    best = std::min(best, std::max(static_cast<double>(tau[b]), spread[b]));
  }
  return best;
}

void StageDp::solve() {
  adopted_.reset();
  levels_.assign(1, Level{});
  std::vector<int> zero(dims_, 0);
  const int root = add_state(levels_[0], 0, zero.data());
  allocate_rows(levels_[0]);
  levels_[0].tau[static_cast<std::size_t>(root) * (blocks_ + 1) + blocks_] = 0.0f;
  levels_[0].first_finite[root] = levels_[0].last_finite[root] = blocks_;
  fastest_prefix_.assign(static_cast<std::size_t>(blocks_) + 1, kNoEnd);
  for (const std::vector<double>& prefix : unit_prefix_)
    for (int b = 0; b <= blocks_; ++b) fastest_prefix_[b] = std::min(fastest_prefix_[b], prefix[b]);

  const int configs = static_cast<int>(in_.configs->size());
  const float limit = in_.max_stage_seconds >= 3e38 ? kInf : static_cast<float>(in_.max_stage_seconds);
  const bool beam = in_.max_states_per_depth > 0;
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  std::vector<int> next_usage(dims_);
  std::size_t here_made = 0;  // states the last depth made, before a beam kept some
  for (int depth = 0; depth < in_.max_stages; ++depth) {
    levels_.emplace_back();
    const Level& here = levels_[depth];
    Level& next = levels_[depth + 1];
    const int in_flight = std::min(depth + 1, buckets_);
    build_memory_rows(in_flight);
    build_end_rows(depth, in_flight, limit);
    if (!in_.quadratic_reference && !in_.window_sweep_reference) describe_sources(here);
    else source_nonincreasing_.assign(here.keys.size(), 0);
    // Sized for as many states as the last depth made (a beam's depths make thousands from its
    // 500 states: growing from 4 per state rehashed at most depths), at least 4 per state here.
    next_index_.clear(std::max(static_cast<std::size_t>(here.keys.size()) * 4, here_made));
    // First every (state, config) that admits a stage, and its target state, created in this
    // order (so state ids, counts and the budget are as when each move was relaxed at once).
    moves_.clear();
    const int states_here = static_cast<int>(here.keys.size());
    for (int s = 0; s < states_here; ++s) {
      const int* usage = &here.usage[static_cast<std::size_t>(s) * dims_];
      const float* tau = &here.tau[s * cells];
      const int lo = std::max(1, here.first_finite[s]), hi = here.last_finite[s];
      if (lo > hi) continue;  // no start block reached (every cell infinite)
      for (int c = 0; c < configs; ++c) {
        const StageConfig& config = (*in_.configs)[c];
        bool room = true;
        for (int d : config_dims_[c]) room = room && usage[d] + config.tp <= capacity_[d];
        if (!room) continue;
        // The target state exists iff some end admits a stage (as the first version had it).
        // For a beam, the lowest score any of its cells can reach (a lower bound, below).
        const float* ends = &end_rows_[static_cast<std::size_t>(c) * cells];
        float bound = kInf;
        if (beam) {
          bound = lowest_end_score(tau, ends, lo, hi);
        } else {
          for (int end = lo; end <= hi && bound == kInf; ++end)
            if (tau[end] != kInf && ends[end] != kInf) bound = 0;
        }
        if (bound == kInf) continue;
        const std::uint64_t key = here.keys[s] + config_key_step_[c];
        int target;
        std::size_t slot = 0;
        if (const int found = next_index_.find_or_slot(key, slot); found >= 0) {
          target = found;
        } else {
          if (states_ >= in_.max_states) {
            truncated_ = true;
            if (in_.stop_when_truncated) {
              levels_.pop_back();  // its rows were never built: leave only finished levels
              return;
            }
            continue;
          }
          std::copy(usage, usage + dims_, next_usage.begin());
          for (int d : config_dims_[c]) next_usage[d] += config.tp;
          target = add_state(next, key, next_usage.data());
          next_index_.add_at(slot, key, target);
        }
        moves_.push_back({s, c, target, bound});
      }
    }
    here_made = next.keys.size();
    const std::int64_t keep = in_.max_states_per_depth;
    if (beam && static_cast<std::int64_t>(next.keys.size()) > keep) {
      keep_best_states(depth, limit);
    } else {
      allocate_rows(next);
      relaxed_states_ += static_cast<std::int64_t>(next.keys.size());
      for (const Move& move : moves_) {
        next.parent[static_cast<std::size_t>(move.target) * configs + move.config] = move.state;
        relax_move(depth, in_flight, limit, move, next, move.target);
      }
    }
    if (next.keys.empty()) break;
  }
}

// Min over ends e of max(tau[e], ends[e]): no cell of the target that this move writes can
// score below it (ends[] above: a stage ending at e has a cycle of at least the single block's,
// and starts at mem_start(e) or later). No cell is ever past the bound (relax_linear() keeps
// none), so tau needs no check. It runs over every move of a beam (~3.6 M for GPT-3-175B on
// 14,336 GPUs): four cells per SSE instruction where the target has SSE2 (every x86-64), two
// accumulators so that one min chain does not wait on itself. maxps / minps return the second
// operand on ties where std::max / std::min return the first: the same value, since no cell
// is NaN or -0 (times are sums and differences of non-negative seconds).
float StageDp::lowest_end_score(const float* tau, const float* ends, int lo, int hi) {
  int end = lo;
  float best = kInf;
#if defined(__SSE2__)
  __m128 a = _mm_set1_ps(kInf), b = _mm_set1_ps(kInf);
  for (; end + 7 <= hi; end += 8) {
    a = _mm_min_ps(a, _mm_max_ps(_mm_loadu_ps(tau + end), _mm_loadu_ps(ends + end)));
    b = _mm_min_ps(b, _mm_max_ps(_mm_loadu_ps(tau + end + 4), _mm_loadu_ps(ends + end + 4)));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_min_ps(a, b));
  best = std::min(std::min(lanes[0], lanes[1]), std::min(lanes[2], lanes[3]));
#endif
  for (; end <= hi; ++end) best = std::min(best, std::max(tau[end], ends[end]));
  return best;
}

// One move: the min-max transition of config move.config over the source state's row into a
// target row (`slot` in `rows`, which is the next level or the beam's arena).
void StageDp::relax_move(int depth, int in_flight, float limit, const Move& move, Level& rows, int slot) {
  const Level& here = levels_[depth];
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  const int c = move.config;
  Relax r;
  r.tau = &here.tau[move.state * cells];
  r.first_end = std::max(1, here.first_finite[move.state]);
  r.last_end = here.last_finite[move.state];
  r.positions = blocks_;
  r.prefix = unit_prefix_[c].data();
  r.p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];  // depth 0: the last stage, no p2p
  r.end_time = &end_time_[static_cast<std::size_t>(c) * cells];  // build_end_rows(), this depth
  r.limit = limit;
  r.mem_start = &mem_start_[in_flight - 1][static_cast<std::size_t>(c) * cells];
  r.best = &rows.tau[slot * cells];
  r.best_end = &rows.prev_block[slot * cells];
  r.best_config = &rows.config[slot * cells];
  r.config = c;
  r.first_finite = &rows.first_finite[slot];
  r.last_finite = &rows.last_finite[slot];
  if (in_.quadratic_reference) relax_quadratic(r);
  else if (source_nonincreasing_[move.state]) relax_nonincreasing(r, &source_runs_[move.state * cells]);
  else relax_linear(r, window_);
}

// Per state of `level`: whether its tau never increases over its finite range (from end 1 on),
// and each end's run of equal tau values (relax_nonincreasing()); once per depth, each row
// then serves every config's move.
void StageDp::describe_sources(const Level& level) {
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  const std::size_t states = level.keys.size();
  source_nonincreasing_.assign(states, 0);
  source_runs_.resize(states * cells);
  for (std::size_t s = 0; s < states; ++s) {
    const float* tau = &level.tau[s * cells];
    std::int16_t* runs = &source_runs_[s * cells];
    const int first = std::max(1, level.first_finite[s]), last = level.last_finite[s];
    if (first > last) {
      source_nonincreasing_[s] = 1;
      continue;
    }
    // The run and the previous value in registers, no branch per cell (no cell is NaN).
    int run = first;
    float previous = tau[first];
    bool rises = false;
    runs[first] = static_cast<std::int16_t>(first);
    for (int e = first + 1; e <= last; ++e) {
      const float value = tau[e];
      run = value == previous ? run : e;
      runs[e] = static_cast<std::int16_t>(run);
      rises = rises | (value > previous);
      previous = value;
    }
    source_nonincreasing_[s] = rises ? 0 : 1;
  }
}

// Beam (max_states_per_depth): of the next level's states, keeps the max_states_per_depth with
// the lowest (beam_score(), state id), the ids in creation order, as a selection over every
// state would. Lazily: a state's score is at least the lowest bound of its moves
// (lowest_end_score()), so states are relaxed in order of (bound, id), each with all of its
// moves in their original order (so its row is exactly the one relaxing every move in order
// gives), and once the next state's (bound, id) is above the worst kept (score, id), no state
// left can enter. On 14,336 GPUs that relaxes about 3 in 10 of the moves (docs/planner.md).
// `eager_beam_reference` relaxes every state first (the test compares both).
void StageDp::keep_best_states(int depth, float limit) {
  Level& next = levels_[depth + 1];
  const int in_flight = std::min(depth + 1, buckets_);
  const int states = static_cast<int>(next.keys.size());
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  const double stages_left = std::max(1, in_.max_stages - depth - 1);
  std::vector<double> spread(cells);  // beam_score()'s second term, the same division per cell
  for (std::size_t b = 0; b < cells; ++b) spread[b] = fastest_prefix_[b] / stages_left;
  const std::size_t keep = static_cast<std::size_t>(in_.max_states_per_depth);
  // Moves grouped by target, in their original order (a counting sort).
  std::vector<int> first_move(states + 1, 0);
  std::vector<float> bound(states, kInf);
  for (const Move& move : moves_) {
    ++first_move[move.target + 1];
    bound[move.target] = std::min(bound[move.target], move.bound);
  }
  for (int t = 0; t < states; ++t) first_move[t + 1] += first_move[t];
  std::vector<int> by_target(moves_.size());
  {
    std::vector<int> fill(first_move.begin(), first_move.end() - 1);
    for (int i = 0; i < static_cast<int>(moves_.size()); ++i) by_target[fill[moves_[i].target]++] = i;
  }
  // States by (bound, id), lowest first, drawn from a heap (most are never drawn); the eager
  // reference takes them in id order.
  // The heap holds (bound, id) packed in one integer, the bound's order-preserving bits above the
  // id, so one integer compare per heap step orders as the pair would: + 0.0f turns a -0 into
  // +0, a non-negative float gets its sign bit set (its bits already order as it does), a
  // negative one has all bits flipped (larger magnitude, smaller key). Bounds are never negative
  // today (times and spreads), but a profile with a negative block time must not reorder them.
  using Ranked = std::pair<double, int>;  // (score or its bound, state id): the selection's order
  std::vector<std::uint64_t> order(static_cast<std::size_t>(states));
  for (int t = 0; t < states; ++t) {
    std::uint32_t bits = in_.eager_beam_reference ? 0u : std::bit_cast<std::uint32_t>(bound[t] + 0.0f);
    bits = (bits >> 31) != 0u ? ~bits : (bits | 0x80000000u);
    order[static_cast<std::size_t>(t)] = (static_cast<std::uint64_t>(bits) << 32) | static_cast<std::uint32_t>(t);
  }
  std::make_heap(order.begin(), order.end(), std::greater<std::uint64_t>());
  // The relaxed states' rows, in an arena indexed by slot.
  Level& arena = beam_arena_;
  arena.first_finite.clear();
  arena.last_finite.clear();
  std::vector<int> slot_of(states, -1);
  std::priority_queue<Ranked> kept;  // the worst kept on top
  int slots = 0;
  for (auto heap_end = order.end(); heap_end != order.begin(); --heap_end) {
    std::pop_heap(order.begin(), heap_end, std::greater<std::uint64_t>());
    const int t = static_cast<int>(static_cast<std::uint32_t>(*(heap_end - 1)));
    if (!in_.eager_beam_reference && kept.size() == keep && Ranked{bound[t], t} > kept.top()) break;
    const int slot = slots++;
    ++relaxed_states_;
    slot_of[t] = slot;
    arena.tau.resize(static_cast<std::size_t>(slots) * cells);
    arena.prev_block.resize(static_cast<std::size_t>(slots) * cells);
    arena.config.resize(static_cast<std::size_t>(slots) * cells);
    std::fill(arena.tau.begin() + static_cast<std::ptrdiff_t>(slot * cells), arena.tau.end(), kInf);
    std::fill(arena.prev_block.begin() + static_cast<std::ptrdiff_t>(slot * cells), arena.prev_block.end(), -1);
    std::fill(arena.config.begin() + static_cast<std::ptrdiff_t>(slot * cells), arena.config.end(), -1);
    arena.first_finite.push_back(blocks_ + 1);
    arena.last_finite.push_back(-1);
    for (int i = first_move[t]; i < first_move[t + 1]; ++i)
      relax_move(depth, in_flight, limit, moves_[by_target[i]], arena, slot);
    const Ranked ranked{beam_score(&arena.tau[slot * cells], arena.first_finite[slot], arena.last_finite[slot], spread.data()), t};
    if (kept.size() < keep) {
      kept.push(ranked);
    } else if (ranked < kept.top()) {
      kept.pop();
      kept.push(ranked);
    }
  }
  std::vector<int> chosen;
  chosen.reserve(kept.size());
  for (; !kept.empty(); kept.pop()) chosen.push_back(kept.top().second);
  std::sort(chosen.begin(), chosen.end());
  Level level;
  // Sized once: growing five row arrays state by state was ~2 % of GPT-3-175B's search (memmove).
  const std::size_t rows = chosen.size() * cells;
  level.keys.reserve(chosen.size());
  level.usage.reserve(chosen.size() * static_cast<std::size_t>(dims_));
  level.tau.reserve(rows);
  level.prev_block.reserve(rows);
  level.config.reserve(rows);
  level.parent.reserve(chosen.size() * in_.configs->size());
  for (int t : chosen) {
    const int id = static_cast<int>(level.keys.size());
    level.keys.push_back(next.keys[t]);
    level.usage.insert(level.usage.end(), next.usage.begin() + static_cast<std::ptrdiff_t>(t) * dims_,
                       next.usage.begin() + static_cast<std::ptrdiff_t>(t + 1) * dims_);
    const auto row = static_cast<std::ptrdiff_t>(slot_of[t] * cells);
    const auto len = static_cast<std::ptrdiff_t>(cells);
    level.tau.insert(level.tau.end(), arena.tau.begin() + row, arena.tau.begin() + row + len);
    level.prev_block.insert(level.prev_block.end(), arena.prev_block.begin() + row, arena.prev_block.begin() + row + len);
    level.config.insert(level.config.end(), arena.config.begin() + row, arena.config.begin() + row + len);
    level.first_finite.push_back(arena.first_finite[slot_of[t]]);
    level.parent.resize(level.parent.size() + in_.configs->size(), -1);
    for (int i = first_move[t]; i < first_move[t + 1]; ++i) {
      const Move& move = moves_[by_target[i]];
      level.parent[static_cast<std::size_t>(id) * in_.configs->size() + move.config] = move.state;
    }
    level.last_finite.push_back(arena.last_finite[slot_of[t]]);
  }
  next = std::move(level);
}

// Follows each cell's chosen end and config back to the state the move came from (parent),
// for `count` states of one depth at once: each walk is a chain of dependent loads over rows
// that no longer fit a cache (GPT-3-175B's beams: ~40 MB), so stepping several chains in turn
// lets their misses overlap. Same choices as walking each alone.
void StageDp::reconstruct(int depth, const int* states, int count, std::vector<StageChoice>* out) const {
  constexpr int kChains = 16;
  const std::size_t configs = in_.configs->size();
  const std::size_t cells = static_cast<std::size_t>(blocks_) + 1;
  int state[kChains], block[kChains];
  for (int first = 0; first < count; first += kChains) {
    const int n = std::min(kChains, count - first);
    for (int k = 0; k < n; ++k) {
      state[k] = states[first + k];
      block[k] = 0;
      out[first + k].reserve(static_cast<std::size_t>(depth));
    }
    for (int d = depth; d > 0; --d) {
      const Level& level = levels_[d];
      const std::int16_t* prev_block = level.prev_block.data();
      const std::int16_t* config = level.config.data();
      const int* parent = level.parent.data();
      for (int k = 0; k < n; ++k) {
        const std::size_t cell = static_cast<std::size_t>(state[k]) * cells + block[k];
        const int end = prev_block[cell];
        const int c = config[cell];
        out[first + k].push_back({bounds_[block[k]], bounds_[end], c});
        state[k] = parent[static_cast<std::size_t>(state[k]) * configs + c];
        block[k] = end;
      }
    }
  }
}

void StageDp::refine(DpCandidate& candidate) {
  if (group_ == 1 || candidate.choices.empty()) return;
  const int stages = static_cast<int>(candidate.choices.size());
  const int n = fine_blocks_;
  // Backwards over the fixed sequence of (pool, TP), one state per depth: the same min-max
  // transition as the DP, over single blocks.
  std::vector<float> after(n + 1, kInf), here(n + 1, kInf);
  after[n] = 0.0f;
  int first = n, last = n;
  std::vector<std::int16_t> ends(static_cast<std::size_t>(stages) * (n + 1), -1);
  std::vector<std::int16_t> unused(n + 1, -1);
  for (int j = stages - 1; j >= 0; --j) {
    const int depth = stages - 1 - j;  // stages placed after this one
    const int c = candidate.choices[j].config;
    std::fill(here.begin(), here.end(), kInf);
    int here_first = n + 1, here_last = -1;
    Relax r;
    r.tau = after.data();
    r.first_end = std::max(1, first);
    r.last_end = last;
    r.positions = n;
    r.prefix = (*in_.time_prefix)[c].data();
    r.p2p = depth == 0 ? 0.0 : (*in_.p2p_cycle_seconds)[c];
    r.mem_start = fine_memory_row(c, std::min(depth + 1, buckets_));
    r.best = here.data();
    r.best_end = &ends[static_cast<std::size_t>(j) * (n + 1)];
    r.best_config = unused.data();
    r.config = c;
    r.first_finite = &here_first;
    r.last_finite = &here_last;
    if (first <= last) relax_linear(r, window_);
    std::swap(after, here);
    first = here_first;
    last = here_last;
  }
  // The DP's own split is one of those searched, so this is never slower; ties keep it.
  if (!(after[0] < candidate.slowest_stage_seconds)) return;
  candidate.slowest_stage_seconds = after[0];
  int start = 0;
  for (int j = 0; j < stages; ++j) {
    const int end = ends[static_cast<std::size_t>(j) * (n + 1) + start];
    candidate.choices[j].first_block = start;
    candidate.choices[j].last_block = end;
    start = end;
  }
}

StageDp::Outcome StageDp::outcome() const {
  return {candidates(), states_, relaxed_states_, truncated_};
}

void StageDp::adopt(std::shared_ptr<const Outcome> outcome) {
  levels_.clear();
  states_ = outcome->states;
  relaxed_states_ = outcome->relaxed_states;
  truncated_ = outcome->truncated;
  adopted_ = std::move(outcome);
}

std::vector<DpCandidate> StageDp::candidates() const {
  if (adopted_) return adopted_->candidates;
  std::vector<DpCandidate> out;
  std::vector<int> complete;
  std::vector<std::vector<StageChoice>> splits;
  for (int depth = 1; depth < static_cast<int>(levels_.size()); ++depth) {
    const Level& level = levels_[depth];
    complete.clear();
    for (int s = 0; s < static_cast<int>(level.keys.size()); ++s)
      if (level.tau[static_cast<std::size_t>(s) * (blocks_ + 1)] != kInf) complete.push_back(s);
    splits.assign(complete.size(), {});
    reconstruct(depth, complete.data(), static_cast<int>(complete.size()), splits.data());
    for (std::size_t i = 0; i < complete.size(); ++i) {
      const int s = complete[i];
      DpCandidate candidate;
      candidate.stages = depth;
      candidate.slowest_stage_seconds = level.tau[static_cast<std::size_t>(s) * (blocks_ + 1)];
      candidate.usage.assign(level.usage.begin() + static_cast<std::ptrdiff_t>(s) * dims_,
                             level.usage.begin() + static_cast<std::ptrdiff_t>(s) * dims_ + pools_);
      candidate.choices = std::move(splits[i]);
      out.push_back(std::move(candidate));
    }
  }
  return out;
}

}  // namespace flotilla::planner
