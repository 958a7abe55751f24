// The store's durability on its own: log rotation into snapshots while writing, reload,
// resourceVersion continuity, and the watch window (resume or expire).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "devcluster/store.h"

using flotilla::devcluster::EventPtr;
using flotilla::devcluster::Json;
using flotilla::devcluster::Store;
using flotilla::devcluster::StoreOptions;
namespace fs = std::filesystem;

namespace {
StoreOptions options(const fs::path& dir) {
  StoreOptions o;
  o.dir = dir;
  o.window_events = 40;
  o.sync_interval = std::chrono::milliseconds(10);
  o.compact_log_after_events = 25;  // rotate often so the test crosses several snapshots
  return o;
}
}  // namespace

TEST(DevclusterStore, SurvivesLogRotationAndReloadsWindowAndVersions) {
  fs::path dir = fs::temp_directory_path() / ("flotilla-store-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  uint64_t last_rv = 0, mid_rv = 0;
  {
    Store store;
    std::string error;
    ASSERT_TRUE(store.open(options(dir), &error)) << error;
    for (int i = 0; i < 100; ++i) {
      auto lock = store.lock();
      std::string name = "obj-" + std::to_string(i % 30);
      last_rv = store.put_locked("/configmaps", "default", name, Json{{"metadata", {{"name", name}}}, {"data", {{"i", i}}}},
                                 i < 30 ? "ADDED" : "MODIFIED");
      if (i == 79) mid_rv = last_rv;
      if (i % 10 == 9) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let the sync thread rotate
      }
    }
    auto lock = store.lock();
    last_rv = store.remove_locked("/configmaps", "default", "obj-0");
  }
  Store again;
  std::string error;
  ASSERT_TRUE(again.open(options(dir), &error)) << error;
  auto lock = again.lock();
  EXPECT_EQ(again.rv_locked(), last_rv);
  EXPECT_EQ(again.list_locked("/configmaps", "default").size(), 29u);
  EXPECT_EQ(again.get_locked("/configmaps", "default", "obj-0"), nullptr);
  auto obj = again.get_locked("/configmaps", "default", "obj-9");
  ASSERT_TRUE(obj);
  EXPECT_EQ((*obj)["data"]["i"], 99);
  EXPECT_EQ((*obj)["metadata"]["resourceVersion"], std::to_string(last_rv - 1));
  // The window survived: a watch from rv mid_rv resumes with the 21 later events.
  std::vector<EventPtr> events;
  ASSERT_TRUE(again.events_since_locked(mid_rv, &events));
  EXPECT_EQ(events.size(), 21u);
  EXPECT_EQ(events.back()->type, "DELETED");
  // Older than the 40-event window: expired.
  events.clear();
  EXPECT_FALSE(again.events_since_locked(last_rv - 45, &events));
  uint64_t next = again.put_locked("/configmaps", "default", "new", Json{{"metadata", {{"name", "new"}}}}, "ADDED");
  EXPECT_EQ(next, last_rv + 1);
  lock.unlock();
  again.close();
  fs::remove_all(dir);
}
