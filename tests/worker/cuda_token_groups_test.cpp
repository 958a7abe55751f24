// Host logic of the CUDA embedding backward (worker/cuda/token_groups.h), checked on the CPU:
// the wte gradient of id v is the sum of dout rows at v's positions in ascending order, so the
// grouping must be complete, stable and in range. Runs everywhere (no GPU needed).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "worker/cuda/token_groups.h"

namespace fc = flotilla::worker::cuda;

TEST(CudaHostLogic, TokenGroupsByHand) {
  // positions: 0 1 2 3 4 5
  // tokens:    5 2 5 0 2 5
  const auto g = fc::group_positions_by_token({5, 2, 5, 0, 2, 5}, 8);
  EXPECT_EQ(g.ids, (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(g.offsets, (std::vector<int>{0, 1, 3, 6}));
  EXPECT_EQ(g.positions, (std::vector<int>{3, 1, 4, 0, 2, 5}));
}

TEST(CudaHostLogic, TokenGroupsReproduceTheCpuEmbeddingGradient) {
  // Summing dout per group, in group order, gives exactly the CPU reference's
  // dwte[t] += dout[pos] in position order (same order per id, so the same float bits).
  const int V = 300, N = 1000, C = 3;
  std::vector<std::int32_t> tokens(N);
  for (int i = 0; i < N; ++i) tokens[i] = (i * 37 + 5) % 11 * 23 % V;
  std::vector<float> dout(static_cast<std::size_t>(N) * C);
  for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = 0.001f * static_cast<float>(i % 97) - 0.03f;
  std::vector<float> want(static_cast<std::size_t>(V) * C, 0.5f), got(want);
  for (int i = 0; i < N; ++i)
    for (int c = 0; c < C; ++c) want[tokens[i] * C + c] += dout[static_cast<std::size_t>(i) * C + c];
  const auto g = fc::group_positions_by_token(tokens, V);
  ASSERT_EQ(g.offsets.size(), g.ids.size() + 1);
  EXPECT_EQ(g.offsets.back(), N);
  for (std::size_t k = 0; k < g.ids.size(); ++k) {
    if (k > 0) {
      EXPECT_LT(g.ids[k - 1], g.ids[k]);
    }
    for (int c = 0; c < C; ++c) {
      float acc = got[g.ids[k] * C + c];
      for (int j = g.offsets[k]; j < g.offsets[k + 1]; ++j) {
        if (j > g.offsets[k]) {
          EXPECT_LT(g.positions[j - 1], g.positions[j]);
        }
        acc += dout[static_cast<std::size_t>(g.positions[j]) * C + c];
      }
      got[g.ids[k] * C + c] = acc;
    }
  }
  EXPECT_EQ(got, want);
}

TEST(CudaHostLogic, TokenOutsideTheVocabularyIsAnErrorNotAHeapWrite) {
  try {
    fc::group_positions_by_token({1, 2, 256}, 256);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token id 256 at position 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fc::group_positions_by_token({-1}, 256), std::invalid_argument);
}
