// exponential_backoff(): base · 2^(attempt-1), capped, for the operator's relaunches and the
// sidecar's local restarts; split_words(): whitespace-separated words.
#include "common/exponential_backoff.h"
#include "common/split_words.h"

#include <gtest/gtest.h>

#include <limits>

TEST(ExponentialBackoff, DoublesFromTheBaseUpToTheCap) {
  EXPECT_EQ(flotilla::exponential_backoff(1, 60, 1), 1);
  EXPECT_EQ(flotilla::exponential_backoff(1, 60, 2), 2);
  EXPECT_EQ(flotilla::exponential_backoff(1, 60, 6), 32);
  EXPECT_EQ(flotilla::exponential_backoff(1, 60, 7), 60);
  EXPECT_EQ(flotilla::exponential_backoff(200, 5000, 5), 3200);
  EXPECT_EQ(flotilla::exponential_backoff(200, 5000, 6), 5000);
  // A long streak stays at the cap instead of overflowing.
  EXPECT_EQ(flotilla::exponential_backoff(1, std::numeric_limits<std::int64_t>::max() / 2, 1000000),
            std::numeric_limits<std::int64_t>::max() / 2);
}

TEST(SplitWords, SplitsAtAnyWhitespace) {
  EXPECT_EQ(flotilla::split_words("  0.3 /d/a\t0.7  /d/b\n"),
            (std::vector<std::string>{"0.3", "/d/a", "0.7", "/d/b"}));
  EXPECT_TRUE(flotilla::split_words(" \t").empty());
}
