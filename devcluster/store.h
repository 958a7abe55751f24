// The versioned object store behind devcluster's API: every object of every resource, one
// global resourceVersion counter, a retained window of watch events, and durable storage.
//
// Guarantees: resourceVersions strictly increase across all writes and across restarts; each
//   write is appended to the data dir's log with write(2) before the call returns (so a killed
//   process loses nothing) and fdatasync'ed by a background thread within sync_interval; a
//   restart reloads every object and the retained event window, so watches can resume with
//   the resourceVersion they had. Objects are immutable once committed (shared_ptr<const>).
//   open() refuses (false, one line naming the file and line) when the snapshot or the log
//   cannot be read or is corrupt, and then changes nothing on disk; only a torn last log line
//   (a write cut short by a crash, never acknowledged) is dropped.
// Assumes: callers hold lock() around *_locked calls; one process owns the data dir.
// Caveats: the window is bounded by events and by bytes (StoreOptions), not time; a watch from
//   before it gets 410 Gone. The log is compacted into a snapshot by event count and by size. Power
//   loss may drop the writes of the last sync_interval (the OS had them, the disk not yet).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace flotilla::devcluster {

using Json = nlohmann::json;
using ObjectPtr = std::shared_ptr<const Json>;

struct StoredEvent {
  uint64_t rv = 0;
  std::string type;      // ADDED, MODIFIED, DELETED
  std::string resource;  // "group/plural" ("/pods" for core)
  std::string ns;
  std::string name;
  ObjectPtr object;
  ObjectPtr previous;    // the object before a MODIFIED (null after a reload or for others)
  std::string line;      // {"type":...,"object":...}\n as sent on a JSON watch
};
using EventPtr = std::shared_ptr<const StoredEvent>;

struct StoreOptions {
  std::filesystem::path dir;
  size_t window_events = 20000;
  // Memory the retained events may hold: each counts twice its serialized size (the parsed
  // object and its watch line). The oldest events go first; the newest is always kept.
  size_t window_bytes = size_t{64} << 20;
  std::chrono::milliseconds sync_interval{200};
  size_t compact_log_after_events = 200000;  // rewrite the snapshot when the log is this long
  // ... or this many bytes, or twice the last snapshot, whichever is larger: restart time and
  // memory stay proportional to the live data, not to how often it was rewritten.
  size_t compact_log_min_bytes = size_t{64} << 20;
};

class Store {
 public:
  Store() = default;
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  bool open(const StoreOptions& options, std::string* error);
  void close();  // final fsync; idempotent

  std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }

  ObjectPtr get_locked(const std::string& resource, const std::string& ns, const std::string& name) const;
  // Objects of a resource in key order ("ns/name"); ns "" = every namespace. Starts after
  // `after_key` when set (for continue tokens).
  std::vector<std::pair<std::string, ObjectPtr>> list_locked(const std::string& resource, const std::string& ns,
                                                             const std::string& after_key = "") const;
  // Every stored object of every resource (for garbage collection).
  std::vector<std::pair<std::string, ObjectPtr>> all_locked() const;
  uint64_t rv_locked() const { return rv_; }

  // Stores obj (metadata.resourceVersion is set here) and emits `type`. Returns the new rv.
  uint64_t put_locked(const std::string& resource, const std::string& ns, const std::string& name, Json obj,
                      const std::string& type);
  // Removes the object and emits DELETED with its last state. Returns the new rv (0 if absent).
  uint64_t remove_locked(const std::string& resource, const std::string& ns, const std::string& name);

  // Events with rv > since, appended to *out. False when `since` is older than the window.
  bool events_since_locked(uint64_t since, std::vector<EventPtr>* out) const;
  // Oldest rv a watch may resume from (inclusive).
  uint64_t oldest_resumable_rv_locked() const { return window_floor_; }
  // Blocks until an event newer than `since` exists or the timeout passes.
  void wait_locked(std::unique_lock<std::mutex>& lock, uint64_t since, std::chrono::milliseconds timeout);
  // Forgets the watch window (every older watch now gets 410 Gone).
  void compact_window();
  void set_window_events(size_t n);
  size_t window_bytes_locked() const { return window_bytes_; }
  void notify_all() { cv_.notify_all(); }

 private:
  std::string make_line(const std::string& type, const Json& obj) const;
  void append_log_locked(const StoredEvent& e);
  void push_window_locked(EventPtr e);
  void trim_window_locked();
  bool load(std::string* error);
  bool write_snapshot(std::string* error);
  void sync_loop();

  StoreOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t rv_ = 0;
  std::map<std::string, std::map<std::string, ObjectPtr>> objects_;
  std::deque<EventPtr> window_;
  uint64_t window_floor_ = 0;  // watches from rv >= floor can resume
  int log_fd_ = -1;
  size_t log_events_ = 0;
  size_t log_bytes_ = 0;
  size_t snapshot_bytes_ = 0;  // size of the last snapshot written
  size_t window_bytes_ = 0;    // sum of event_cost() over window_
  bool dirty_ = false;
  bool stopping_ = false;
  std::thread sync_thread_;
  std::condition_variable sync_cv_;
};

}  // namespace flotilla::devcluster
