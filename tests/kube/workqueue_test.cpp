#include "kube/workqueue.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace flotilla::kube {
namespace {

using namespace std::chrono_literals;

struct KubeWorkQueue : ::testing::Test {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  WorkQueue q{clock, std::make_unique<ItemExponentialRateLimiter>(5ms, 1000s)};
};

TEST_F(KubeWorkQueue, DeduplicatesQueuedItems) {
  q.add("a");
  q.add("a");
  q.add("b");
  EXPECT_EQ(q.len(), 2u);
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.get(), "b");
  EXPECT_EQ(q.len(), 0u);
}

TEST_F(KubeWorkQueue, ItemAddedWhileProcessingIsRequeuedOnceAfterDone) {
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  q.add("a");
  q.add("a");
  EXPECT_EQ(q.len(), 0u) << "must not hand out an item that is being processed";
  q.done("a");
  EXPECT_EQ(q.len(), 1u);
  EXPECT_EQ(q.get(), "a");
  q.done("a");
  EXPECT_EQ(q.len(), 0u);
}

TEST_F(KubeWorkQueue, DoneWithoutNewAddDoesNotRequeue) {
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  q.done("a");
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.get_for(0s), std::nullopt);
}

TEST_F(KubeWorkQueue, AddAfterWaitsOnTheInjectedClock) {
  q.add_after("a", 1s);
  EXPECT_EQ(q.len(), 0u);
  EXPECT_EQ(q.waiting_len(), 1u);
  clock->advance(999ms);
  EXPECT_EQ(q.get_for(0s), std::nullopt);
  clock->advance(1ms);
  EXPECT_EQ(q.get_for(0s), "a");
}

TEST_F(KubeWorkQueue, SecondAddAfterKeepsTheEarlierTime) {
  q.add_after("a", 5s);
  q.add_after("a", 1s);
  q.add_after("a", 3s);
  EXPECT_EQ(q.waiting_len(), 1u);
  clock->advance(1s);
  EXPECT_EQ(q.get_for(0s), "a");
}

TEST_F(KubeWorkQueue, BlockedGetWakesWhenClockAdvances) {
  q.add_after("a", 10s);
  std::atomic<bool> got{false};
  std::thread worker([&] {
    auto item = q.get();
    got = item == std::optional<std::string>("a");
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(got.load());
  clock->advance(10s);
  for (int i = 0; i < 2000 && !got; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(got.load());
  q.shut_down();
  worker.join();
}

TEST_F(KubeWorkQueue, RateLimitedAddsBackOffExponentiallyAndForgetResets) {
  // 5 ms * 2^n: 5, 10, 20, 40 ms.
  for (auto expected : {5ms, 10ms, 20ms, 40ms}) {
    q.add_rate_limited("a");
    clock->advance(expected - 1ms);
    EXPECT_EQ(q.get_for(0s), std::nullopt) << "ready too early at " << expected.count() << " ms";
    clock->advance(1ms);
    ASSERT_EQ(q.get_for(0s), "a");
    q.done("a");
  }
  EXPECT_EQ(q.num_requeues("a"), 4);
  q.forget("a");
  EXPECT_EQ(q.num_requeues("a"), 0);
  q.add_rate_limited("a");
  clock->advance(5ms);
  EXPECT_EQ(q.get_for(0s), "a");
}

TEST_F(KubeWorkQueue, ShutdownHandsOutQueuedItemsThenStops) {
  q.add("a");
  q.add_after("later", 1s);
  q.shut_down();
  q.add("b");  // ignored after shutdown
  EXPECT_EQ(q.get(), "a");
  EXPECT_EQ(q.get(), std::nullopt);
  EXPECT_TRUE(q.shutting_down());
}

TEST_F(KubeWorkQueue, ShutdownWakesBlockedWorkers) {
  std::vector<std::thread> workers;
  std::atomic<int> stopped{0};
  for (int i = 0; i < 3; ++i)
    workers.emplace_back([&] {
      if (!q.get()) ++stopped;
    });
  std::this_thread::sleep_for(10ms);
  q.shut_down();
  for (auto& w : workers) w.join();
  EXPECT_EQ(stopped.load(), 3);
}

TEST_F(KubeWorkQueue, ShutdownWithDrainWaitsForDone) {
  q.add("a");
  ASSERT_EQ(q.get(), "a");
  std::atomic<bool> drained{false};
  std::thread t([&] {
    q.shut_down_with_drain();
    drained = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(drained.load());
  q.done("a");
  t.join();
  EXPECT_TRUE(drained.load());
}

TEST(KubeWorkQueueConcurrency, NoKeyIsProcessedByTwoWorkersAtOnceAndNoAddIsLost) {
  WorkQueue q(real_clock(), std::make_unique<ItemExponentialRateLimiter>(1ms, 10ms));
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<bool> overlap{false};
  std::map<std::string, int> processed_after_last_add;
  std::atomic<int> handled{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      while (auto key = q.get()) {
        {
          std::lock_guard lock(mu);
          if (!in_flight.insert(*key).second) overlap = true;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        {
          std::lock_guard lock(mu);
          in_flight.erase(*key);
          processed_after_last_add[*key]++;
        }
        ++handled;
        q.done(*key);
      }
    });
  for (int round = 0; round < 200; ++round) q.add("k" + std::to_string(round % 7));
  // Every key added must be processed at least once after its last add: wait for the queue to
  // go idle, then check each key was seen.
  for (int i = 0; i < 5000 && (q.len() > 0 || handled.load() < 7); ++i)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  q.shut_down_with_drain();
  for (auto& w : workers) w.join();
  EXPECT_FALSE(overlap.load());
  std::lock_guard lock(mu);
  EXPECT_EQ(processed_after_last_add.size(), 7u);
  EXPECT_LE(handled.load(), 200) << "de-duplication should merge some adds";
}

TEST(KubeRateLimiters, ItemExponentialCapsAtMax) {
  ItemExponentialRateLimiter l(1s, 10s);
  std::vector<Clock::duration> got;
  for (int i = 0; i < 6; ++i) got.push_back(l.when("x"));
  std::vector<Clock::duration> want = {1s, 2s, 4s, 8s, 10s, 10s};
  EXPECT_EQ(got, want);
  EXPECT_EQ(l.when("other"), Clock::duration(1s)) << "per-item history";
  for (int i = 0; i < 200; ++i) l.when("long");
  EXPECT_EQ(l.when("long"), Clock::duration(10s)) << "no overflow on long streaks";
}

TEST(KubeRateLimiters, TokenBucketAllowsBurstThenSpacesAtQps) {
  auto clock = std::make_shared<ManualClock>();
  TokenBucketRateLimiter l(10.0, 2, clock);
  EXPECT_EQ(l.when("a"), Clock::duration::zero());
  EXPECT_EQ(l.when("b"), Clock::duration::zero());
  // The bucket is empty: the 3rd token arrives in 1/10 s, the 4th in 2/10 s.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(l.when("c")), 100ms);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(l.when("d")), 200ms);
  clock->advance(1s);  // refills to the burst (2), not beyond
  EXPECT_EQ(l.when("e"), Clock::duration::zero());
  EXPECT_EQ(l.when("f"), Clock::duration::zero());
  EXPECT_GT(l.when("g"), Clock::duration::zero());
}

TEST(KubeRateLimiters, DefaultControllerLimiterIsMaxOfBoth) {
  auto clock = std::make_shared<ManualClock>();
  auto l = default_controller_rate_limiter(clock);
  EXPECT_EQ(l->when("a"), Clock::duration(5ms));  // bucket has 100 tokens, item backoff 5 ms
  EXPECT_EQ(l->when("a"), Clock::duration(10ms));
  EXPECT_EQ(l->num_requeues("a"), 2);
  l->forget("a");
  EXPECT_EQ(l->num_requeues("a"), 0);
}

}  // namespace
}  // namespace flotilla::kube
