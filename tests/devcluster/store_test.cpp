// The store's durability on its own: log rotation into snapshots while writing, reload,
// resourceVersion continuity, and the watch window (resume or expire).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// A corrupt data dir must refuse the start and leave the files as they were: open() would
// otherwise write a fresh snapshot without the unread records and delete the log.
TEST(DevclusterStore, CorruptLogOrSnapshotRefusesToStartAndLosesNothing) {
  fs::path dir = fs::temp_directory_path() / ("flotilla-store-corrupt-" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto write_objects = [&](int n) {
    Store store;
    std::string error;
    ASSERT_TRUE(store.open(options(dir), &error)) << error;
    auto lock = store.lock();
    for (int i = 0; i < n; ++i) {
      std::string name = "cm-" + std::to_string(i);
      store.put_locked("/configmaps", "default", name, Json{{"metadata", {{"name", name}}}}, "ADDED");
    }
  };
  auto object_count = [&](std::string* error) -> long {
    Store store;
    if (!store.open(options(dir), error)) return -1;
    auto lock = store.lock();
    return static_cast<long>(store.list_locked("/configmaps", "default").size());
  };
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::trunc) << text; };
  write_objects(5);  // 5 records in the log (fewer than the rotation threshold of 25)
  const fs::path log = dir / "log";
  const std::string good_log = read(log);
  ASSERT_EQ(std::count(good_log.begin(), good_log.end(), '\n'), 5);

  // Line 2 of 5 garbled: refuse, naming the file and line; the log is untouched.
  std::string garbled = good_log;
  garbled.replace(garbled.find('\n') + 1, 7, "#garble");
  write(log, garbled);
  std::string error;
  EXPECT_EQ(object_count(&error), -1);
  EXPECT_NE(error.find(log.string() + ": line 2 is corrupt"), std::string::npos) << error;
  EXPECT_NE(error.find("refusing to start"), std::string::npos) << error;
  EXPECT_EQ(read(log), garbled);

  // Valid JSON without the record's fields is corrupt too (and no exception escapes).
  write(log, "{\"unexpected\":1}\n" + good_log);
  error.clear();
  EXPECT_EQ(object_count(&error), -1);
  EXPECT_NE(error.find("line 1 is corrupt"), std::string::npos) << error;

  // A torn last line is a write cut short by a crash: dropped, everything before it kept.
  write(log, good_log + "{\"rv\":99999,\"t\":\"ADD");
  error.clear();
  EXPECT_EQ(object_count(&error), 5) << error;

  // That start folded the log into the snapshot; a corrupt snapshot refuses as well.
  const fs::path snapshot = dir / "snapshot";
  std::string snap = read(snapshot);
  write(snapshot, snap.substr(0, snap.size() / 2) + "\n" + "not json\n");
  error.clear();
  EXPECT_EQ(object_count(&error), -1);
  EXPECT_NE(error.find(snapshot.string() + " is corrupt"), std::string::npos) << error;
  write(snapshot, snap);
  error.clear();
  EXPECT_EQ(object_count(&error), 5) << error;
  fs::remove_all(dir);
}
