// The stage dynamic program behind search.h (Sailor §4.2.2, Eq. 1), for one (mbs, D).
//
// Guarantees: for every pipeline depth P ≤ max_stages and every per-pool usage vector u (GPUs
//   of pool k = D * sum of TP degrees of the stages on k), solve() finds the smallest possible
//   time of the slowest stage (its 1F1B cycle: forward + backward + p2p of one micro-batch) over all contiguous splits
//   of the blocks into P stages and all (pool, TP) choices per stage with u, such that every
//   stage fits in memory with the 1F1B in-flight micro-batches of its position. Exact over
//   that space when every block is its own position (max_units = 0 or blocks <= max_units):
//   states are (stages placed from the end, u) and each keeps the best time for every start
//   block, so uneven splits are covered.
// Assumes: stage time and stage memory grow when a stage takes more blocks (true of the time
//   and memory models: every block has non-negative time and bytes).
// Caveats: the cost is O(states x configs x blocks) time and O(states x blocks) memory (one
//   transition is O(blocks), see relax_linear() in the .cpp); states grow as D shrinks and
//   with the depths a model allows, so search.h visits large D first (H3), a state budget
//   stops runaway cases honestly (truncated() says so), and past max_units blocks the DP runs
//   over groups of layers, which makes it approximate: stage boundaries fall every
//   layers_per_position() layers until refine() re-splits a candidate (docs/planner.md).
//   A beam (max_states_per_depth) relaxes a depth's states lazily, lowest score bound first,
//   and keeps exactly the states relaxing all of them would (keep_best_states()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "planner/memory_model.h"
#include "planner/search_space.h"

namespace flotilla::planner {

struct StageDpInput {
  const ModelSpec* model = nullptr;
  const TrainingOptions* training = nullptr;
  const std::vector<SearchPool>* pools = nullptr;
  const std::vector<StageConfig>* configs = nullptr;
  // Per config: prefix sums over blocks of forward + backward seconds of one micro-batch.
  const std::vector<std::vector<double>>* time_prefix = nullptr;
  // Per config: 2 x p2p seconds of one micro-batch's activations, paid by every stage but the
  // last (time_model.h's cycle = forward + backward + 2 p2p).
  const std::vector<double>* p2p_cycle_seconds = nullptr;
  const MemoryModelConstants* memory_constants = nullptr;  // as evaluate() uses them
  int micro_batch_size = 1;
  int dp = 1;
  int num_micro_batches = 1;
  int max_stages = 1;
  // Branch and bound: no stage may be slower than this (a known plan already beats any
  // pipeline whose slowest cycle exceeds it, since iteration >= m x slowest cycle).
  double max_stage_seconds = 1e300;
  std::int64_t max_states = 400000;
  // Stop at once when max_states is reached (truncated() then says so): for a capped trial run
  // whose result is thrown away when it truncates (search.cpp, seed_bound()), the rest of the
  // run after the cap would be wasted work.
  bool stop_when_truncated = false;
  // > 0: a beam, not the exact DP: past this many states at one depth, only the most promising
  // are kept (keep_best_states()). The search uses it to find a first plan whose time bounds
  // the exact run on large clusters; every pipeline it returns is still a real one.
  std::int64_t max_states_per_depth = 0;
  // A beam that relaxes every state of a depth before choosing, instead of only those whose
  // lower bound can still enter (same states and rows; the test compares both).
  bool eager_beam_reference = false;
  // The first version's O(blocks^2) sweep per (state, config) instead of the O(blocks) one;
  // same result cell for cell. Only the bench and the tests use it, as the baseline.
  bool quadratic_reference = false;
  // The O(blocks) sliding-window sweep for every row, also where the source row never increases
  // and the single-pointer sweep would serve (same result cell for cell; tests only).
  bool window_sweep_reference = false;
  // Past this many blocks, the DP runs over positions that group runs of identical layers
  // (embedding and head stay alone), at most max_units of them; refine() then re-splits a
  // candidate over single blocks for its sequence of (pool, TP). 0: one position per block.
  int max_units = 0;
};

struct DpCandidate {
  int stages = 0;
  float slowest_stage_seconds = 0;
  std::vector<int> usage;  // per pool, in TP units (GPUs / D)
  std::vector<StageChoice> choices;
};

class StageDp {
 public:
  explicit StageDp(const StageDpInput& input);

  void solve();
  // Every complete pipeline the DP found (one per depth and usage vector), with its split.
  std::vector<DpCandidate> candidates() const;
  // What solve() found, for another run with identical inputs (stage_dp_memo.h).
  struct Outcome {
    std::vector<DpCandidate> candidates;
    std::int64_t states = 0;
    std::int64_t relaxed_states = 0;
    bool truncated = false;
  };
  Outcome outcome() const;
  // Instead of solve(): takes the outcome of a run whose inputs were identical, so candidates(),
  // states(), relaxed_states() and truncated() answer as solve() would have.
  void adopt(std::shared_ptr<const Outcome> outcome);
  std::int64_t states() const { return states_; }
  // States whose rows were computed (a lazy beam skips those that cannot enter it).
  std::int64_t relaxed_states() const { return relaxed_states_; }
  bool truncated() const { return truncated_; }
  // Block b alone does not fit any config even as the last stage (H2's memory floor).
  bool block_fits_somewhere(int block);
  // True only when solve() would find no complete pipeline: a relaxation of the DP that keeps
  // depth, memory at each depth's in-flight count and the stage-time bound, but replaces the
  // per-dimension capacities by one weighted sum (weights: 1 per TP unit, then GPU memory),
  // so it runs over (depth, start block) only, O(depth x configs x blocks). False means
  // "maybe": solve() decides. On large clusters most (mbs, D) runs that find nothing are
  // ruled out here (docs/planner.md, "Search at cluster scale").
  bool cannot_complete();
  // Takes the memory rows `other` has built when it is a solver for the same model, pools,
  // configs, micro-batch size, D and positions (the rows do not depend on the bound or the
  // beam), instead of building them again; otherwise a no-op.
  void reuse_memory_rows(const StageDp& other);
  // Layers per DP position (1: exact, every block boundary searched).
  int layers_per_position() const { return group_; }
  // When positions group layers: the best split over single blocks for the candidate's
  // sequence of (pool, TP) and depth (exact for that sequence); kept only when its slowest
  // cycle is lower. No-op when every block is its own position.
  void refine(DpCandidate& candidate);

 private:
  struct Level {
    std::vector<std::uint64_t> keys;
    std::vector<int> usage;      // states x usage dimensions
    std::vector<float> tau;      // states x (blocks + 1)
    std::vector<std::int16_t> prev_block;
    std::vector<std::int16_t> config;
    std::vector<int> parent;  // states x configs: the state a move with that config came from
    // Per state: the lowest and highest start block with a finite tau (lowest > highest: none).
    std::vector<int> first_finite, last_finite;
  };
  // The next depth's states by key while it is built (open addressing, linear probing; the
  // per-depth unordered_map's node allocations were ~5 % of a cluster-scale search).
  class StateIndex {
   public:
    void clear(std::size_t expected);
    // One probe for "find, else add": the id stored for `key`, or -1 and the empty `slot` where
    // add_at() stores it (valid until the next call).
    int find_or_slot(std::uint64_t key, std::size_t& slot);
    void add_at(std::size_t slot, std::uint64_t key, int id);

   private:
    std::size_t slot_of(std::uint64_t key) const;
    void grow();  // doubles the slots
    std::vector<std::uint64_t> keys_;
    std::vector<int> ids_;  // -1: empty slot
    std::size_t size_ = 0;
  };

  // One transition to relax: source state, config, target state in the next level, and (for a
  // beam) a lower bound on the target's beam score from this move (lowest_end_score()).
  struct Move {
    int state = 0;
    int config = 0;
    int target = 0;
    float bound = 0;
  };

  int add_state(Level& level, std::uint64_t key, const int* usage);
  void allocate_rows(Level& level) const;
  void build_end_rows(int depth, int in_flight, float limit);
  static float lowest_end_score(const float* tau, const float* ends, int lo, int hi);
  static double beam_score(const float* tau, int first, int last, const double* spread);
  void relax_move(int depth, int in_flight, float limit, const Move& move, Level& rows, int slot);
  void describe_sources(const Level& level);
  void build_memory_rows(int in_flight);
  void memory_row(int c, int in_flight, const std::vector<int>& bounds, const int* floor, int* row) const;
  const int* fine_memory_row(int c, int in_flight);
  // Smallest start block whose stage ending at end_block fits with in_flight micro-batches.
  int mem_start(int config, int in_flight, int end_block) const {
    return mem_start_[in_flight - 1][static_cast<std::size_t>(config) * (blocks_ + 1) + end_block];
  }
  // The splits of `count` states of depth `depth` into out[0 .. count).
  void reconstruct(int depth, const int* states, int count, std::vector<StageChoice>* out) const;
  void keep_best_states(int depth, float limit);

  StageDpInput in_;
  int blocks_ = 0;       // DP positions (= model blocks unless grouped)
  int fine_blocks_ = 0;  // model blocks
  int group_ = 1;        // layers per position
  std::vector<int> bounds_;  // first block of each position, then fine_blocks_
  std::vector<std::vector<double>> unit_prefix_;  // time_prefix sampled at bounds_
  std::map<std::pair<int, int>, std::vector<int>> fine_mem_start_;  // (config, in-flight)
  int pools_ = 0;
  int buckets_ = 1;
  int dims_ = 0;                        // usage dimensions: pools_, then binding TP levels
  std::vector<int> capacity_;           // per dimension, in TP units
  std::vector<std::uint64_t> stride_;   // mixed-radix key of a usage vector
  std::vector<std::vector<int>> config_dims_;      // per config: dimensions it adds its TP to
  std::vector<std::uint64_t> config_key_step_;     // per config: the key's step
  std::vector<std::vector<int>> mem_start_;  // per in-flight count, built on first use
  std::vector<Level> levels_;
  std::vector<int> window_;  // relax_linear()'s deque, reused
  std::vector<double> fastest_prefix_;  // per position: the least prefix time over the configs
  std::vector<float> end_rows_;         // build_end_rows(), per config x position, this depth
  std::vector<double> end_time_;        // build_end_rows(), per config x position: prefix + p2p
  std::vector<Move> moves_;             // this depth's transitions, in creation order
  Level beam_arena_;
  StateIndex next_index_;
  std::vector<char> source_nonincreasing_;    // describe_sources(), per state of this depth
  std::vector<std::int16_t> source_runs_;     // describe_sources(), per state x position                    // keep_best_states()'s rows, reused
  std::int64_t states_ = 0;
  std::int64_t relaxed_states_ = 0;
  bool truncated_ = false;
  std::shared_ptr<const Outcome> adopted_;  // adopt(); shared with the memo, not copied
};

}  // namespace flotilla::planner
