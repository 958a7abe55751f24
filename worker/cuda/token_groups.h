// Host-side grouping of token positions by token id for the CUDA embedding backward (which
// sums each id's rows of dout in position order instead of using float atomics). Header-only,
// C++17, no CUDA, so a CPU test checks it.
//
// Guarantees: ids ascending and distinct; positions of one id ascending (a stable counting
// sort); offsets has ids.size() + 1 entries, group g is positions[offsets[g], offsets[g+1]).
// Throws std::invalid_argument naming the first token outside [0, vocab) (it would index
// out of the count array and of wte).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace flotilla::worker::cuda {

struct TokenGroups {
  std::vector<int> ids, offsets, positions;
};

inline TokenGroups group_positions_by_token(const std::vector<std::int32_t>& tokens, int vocab) {
  const int n = static_cast<int>(tokens.size());
  std::vector<int> count(static_cast<std::size_t>(vocab) + 1, 0);
  for (int i = 0; i < n; ++i) {
    const std::int32_t t = tokens[static_cast<std::size_t>(i)];
    if (t < 0 || t >= vocab)
      throw std::invalid_argument("embedding backward: token id " + std::to_string(t) +
                                  " at position " + std::to_string(i) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ++count[static_cast<std::size_t>(t) + 1];
  }
  for (int v = 0; v < vocab; ++v) count[v + 1] += count[v];
  TokenGroups g;
  g.positions.resize(static_cast<std::size_t>(n));
  std::vector<int> cursor(count.begin(), count.end() - 1);
  for (int i = 0; i < n; ++i) g.positions[cursor[tokens[static_cast<std::size_t>(i)]]++] = i;
  for (int v = 0; v < vocab; ++v)
    if (count[v + 1] > count[v]) {
      g.ids.push_back(v);
      g.offsets.push_back(count[v]);
    }
  g.offsets.push_back(n);
  return g;
}

}  // namespace flotilla::worker::cuda
