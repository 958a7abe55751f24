// The physical layout of a job: pipeline stages x data-parallel replicas, and which model
// units (embedding, blocks, head+loss) each stage holds.
//
// Guarantees: make_layout() either returns a layout where every unit belongs to exactly one
//   stage (contiguous, in order, each stage non-empty), world = pp * dp and dp divides the
//   number of virtual shards; or a one-line error saying what is impossible and what to fix.
//   Rank r is (stage = r % pp, dp_index = r / pp): one pipeline is pp consecutive ranks.
// Assumes: units are numbered 0..num_units-1 in forward order.
// Caveats: none of this is tied to hardware; placement is the planner's job.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "worker/runtime/data_loader.h"

namespace flotilla::worker {

struct Layout {
  int pp = 1;
  int dp = 1;
  std::vector<std::pair<int, int>> stage_units;  // per stage: [first unit, end unit)

  int world_size() const { return pp * dp; }
  int stage_of(int rank) const { return rank % pp; }
  int dp_index_of(int rank) const { return rank / pp; }
  int rank_of(int stage, int dp_index) const { return dp_index * pp + stage; }
  int stage_of_unit(int unit) const;
  std::string partition_string() const;  // "0:3,3:5"
};

// partition: "" for an even split (earlier stages take the remainder), else "a:b,b:c,...".
std::variant<Layout, std::string> make_layout(int world_size, int pp, int dp, int num_units,
                                              const std::string& partition,
                                              const BatchGeometry& geometry);

}  // namespace flotilla::worker
