// Frenzy's MARP against a hand-worked example (numbers computed by hand below).
#include <gtest/gtest.h>

#include "planner/marp.h"

namespace fp = flotilla::planner;

TEST(Marp, HandWorkedExample) {
  // GPT-2-350M-like: V=50257, h=1024, l=24, s=1024, a=16, B=8.
  fp::MarpInput in{1024, 8, 1024, 24, 16, 50257};
  // W = 50257*1024 + 24*(12*1024^2 + 13*1024) = 51,463,168 + 302,309,376
  EXPECT_DOUBLE_EQ(fp::marp_weight_params(in), 353772544.0);
  // d=2, t=2: 20W/2 = 3,537,725,440; sbhl = 201,326,592; 10/2 + 24/4 + 5*16*1024/(2*1024*2) = 31
  EXPECT_DOUBLE_EQ(fp::marp_required_bytes(in, 2, 2), 3537725440.0 + 201326592.0 * 31);
  EXPECT_TRUE(fp::marp_fits(in, 2, 2, 16e9));
  EXPECT_FALSE(fp::marp_fits(in, 2, 2, 8e9));
}

TEST(Marp, PlansAreRankedFewestGpusFirst) {
  fp::MarpInput in{1024, 8, 1024, 24, 16, 50257};
  const auto plans = fp::marp_resource_plans(in, 8e9, 16, 8);
  ASSERT_FALSE(plans.empty());
  for (std::size_t i = 1; i < plans.size(); ++i) EXPECT_LE(plans[i - 1].gpus, plans[i].gpus);
  for (const auto& p : plans) {
    EXPECT_LT(p.required_bytes, 8e9);
    EXPECT_EQ(8 % p.d, 0);
  }
  // (1,1) needs 20W + sbhl*(10+24+640) = 7.08e9 + 135.7e9: does not fit; the first plan must.
  EXPECT_FALSE(fp::marp_fits(in, 1, 1, 8e9));
  EXPECT_TRUE(fp::marp_fits(in, plans.front().d, plans.front().t, 8e9));
}
