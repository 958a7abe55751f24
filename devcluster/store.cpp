#include "devcluster/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <set>

#include "devcluster/json_limits.h"

namespace flotilla::devcluster {
namespace {

constexpr uint64_t kFirstRv = 1000;  // leaves "0" and small numbers meaning "any" / unset

std::string key_of(const std::string& ns, const std::string& name) { return ns + "/" + name; }

// Memory an event in the window holds: its watch line plus the parsed object (about as large).
size_t event_cost(const StoredEvent& e) { return 2 * e.line.size() + 256; }

bool write_all_fd(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void fsync_dir(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

Store::~Store() { close(); }

std::string Store::make_line(const std::string& type, const Json& obj) const {
  return "{\"type\":\"" + type + "\",\"object\":" + obj.dump() + "}\n";
}

bool Store::open(const StoreOptions& options, std::string* error) {
  options_ = options;
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    *error = "cannot create data dir " + options.dir.string() + ": " + ec.message();
    return false;
  }
  rv_ = kFirstRv;
  window_floor_ = kFirstRv;
  if (!load(error)) return false;
  // Start every run from a fresh snapshot and an empty log.
  if (!write_snapshot(error)) return false;
  std::filesystem::remove(options_.dir / "log", ec);
  std::filesystem::remove(options_.dir / "log.old", ec);
  log_fd_ = ::open((options_.dir / "log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd_ < 0) {
    *error = "cannot open " + (options_.dir / "log").string() + ": " + std::strerror(errno);
    return false;
  }
  fsync_dir(options_.dir);
  sync_thread_ = std::thread([this] { sync_loop(); });
  return true;
}

void Store::close() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  sync_cv_.notify_all();
  cv_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
  if (log_fd_ >= 0) {
    ::fdatasync(log_fd_);
    ::close(log_fd_);
    log_fd_ = -1;
  }
}

// Why a record that parsed cannot be applied ("" when it can): the API refuses such objects
// at write time, so these come only from older versions or hand edits, and are skipped.
std::string unusable_record(const Json& rec) {
  auto o = rec.find("o");
  if (o == rec.end() || !o->is_object()) return "its object is not a JSON object";
  auto meta = o->find("metadata");
  if (meta == o->end() || !meta->is_object()) return "its object has no metadata";
  auto name = meta->find("name");
  if (name == meta->end() || !name->is_string() || *name != rec.value("n", Json())) return "its metadata.name does not match";
  return "";
}

// The rv of a log line without parsing it ({"rv":N,... as append_log_locked writes it); 0 if none.
uint64_t leading_rv(const std::string& line) {
  static const std::string prefix = "{\"rv\":";
  if (line.compare(0, prefix.size(), prefix) != 0) return 0;
  uint64_t rv = 0;
  for (size_t i = prefix.size(); i < line.size() && i < prefix.size() + 19 && line[i] >= '0' && line[i] <= '9'; ++i)
    rv = rv * 10 + static_cast<uint64_t>(line[i] - '0');
  return rv;
}

bool Store::load(std::string* error) {
  // Records that cannot be applied are skipped with one line each, and the file they came from
  // is copied aside before open() replaces it, so nothing is lost and the start goes on.
  std::set<std::filesystem::path> keep;
  auto skip = [&](const std::filesystem::path& file, size_t line_no, const std::string& why) {
    keep.insert(file);
    std::cerr << "flotilla-devcluster: store: skipping " + file.string() + " line " + std::to_string(line_no) + ": " + why +
                     " (a copy of the file is kept beside it as " + file.filename().string() + ".skipped-*)\n"
              << std::flush;
  };
  // The record envelope adds a level or two around an object the API accepted.
  auto too_deep = [](const std::string& line) { return json_nesting_depth(line) > kMaxJsonNestingDepth + 8; };
  auto apply = [&](const Json& rec, bool window_only) {
    uint64_t rv = rec.at("rv").get<uint64_t>();
    std::string type = rec.at("t").get<std::string>();
    auto ev = std::make_shared<StoredEvent>();
    ev->rv = rv;
    ev->type = type;
    ev->resource = rec.at("r").get<std::string>();
    ev->ns = rec.at("ns").get<std::string>();
    ev->name = rec.at("n").get<std::string>();
    ev->object = std::make_shared<const Json>(rec.at("o"));
    ev->line = make_line(type, *ev->object);
    if (!window_only) {
      if (type == "DELETED") objects_[ev->resource].erase(key_of(ev->ns, ev->name));
      else objects_[ev->resource][key_of(ev->ns, ev->name)] = ev->object;
      rv_ = std::max(rv_, rv);
    }
    push_window_locked(ev);
  };
  // Anything unreadable refuses the start: open() would otherwise write a fresh snapshot over
  // the unread data and delete the log.
  const std::string refuse = "; refusing to start so that no stored object is lost (restore it from a backup, or "
                             "move " + options_.dir.string() + " away to start empty)";
  uint64_t snapshot_rv = 0;
  const std::filesystem::path snap_path = options_.dir / "snapshot";
  std::ifstream snap(snap_path);
  const int snap_errno = errno;
  if (!snap && std::filesystem::exists(snap_path)) {
    *error = "cannot read " + snap_path.string() + ": " + std::strerror(snap_errno) + refuse;
    return false;
  }
  if (snap) {
    std::string line;
    if (!std::getline(snap, line)) {
      *error = snap_path.string() + " is empty" + refuse;
      return false;
    }
    try {
      Json head = Json::parse(line);
      snapshot_rv = head.at("rv").get<uint64_t>();
      rv_ = snapshot_rv;
      window_floor_ = head.at("floor").get<uint64_t>();
      size_t line_no = 1;
      while (std::getline(snap, line)) {
        ++line_no;
        if (line.empty()) continue;
        if (too_deep(line)) {
          skip(snap_path, line_no, "nested more than " + std::to_string(kMaxJsonNestingDepth) + " levels");
          continue;
        }
        Json rec = Json::parse(line);
        if (std::string why = unusable_record(rec); !why.empty()) {
          skip(snap_path, line_no, why);
          continue;
        }
        if (rec.contains("w")) {
          apply(rec, true);
        } else {
          objects_[rec.at("r").get<std::string>()][key_of(rec.at("ns"), rec.at("n"))] =
              std::make_shared<const Json>(std::move(rec.at("o")));
        }
      }
    } catch (const std::exception& e) {
      *error = snap_path.string() + " is corrupt (" + e.what() + ")" + refuse;
      return false;
    }
  }
  for (const char* name : {"log.old", "log"}) {
    const std::filesystem::path path = options_.dir / name;
    std::ifstream log(path);
    const int log_errno = errno;
    if (!log) {
      if (!std::filesystem::exists(path)) continue;
      *error = "cannot read " + path.string() + ": " + std::strerror(log_errno) + refuse;
      return false;
    }
    // Only the last line may be torn (a crash mid-write; that write was never acknowledged).
    // A bad line with records after it is corruption: skipping it would drop those records.
    std::string line, bad;
    size_t line_no = 0, bad_line_no = 0;
    while (std::getline(log, line)) {
      ++line_no;
      if (line.empty()) continue;
      if (!bad.empty()) {
        *error = path.string() + ": line " + std::to_string(bad_line_no) + " is corrupt (" + bad +
                 ") and later records follow it" + refuse;
        return false;
      }
      if (too_deep(line)) {
        rv_ = std::max(rv_, leading_rv(line));  // its resourceVersion was handed out
        skip(path, line_no, "nested more than " + std::to_string(kMaxJsonNestingDepth) + " levels");
        continue;
      }
      try {
        Json rec = Json::parse(line);
        if (rec.at("rv").get<uint64_t>() <= snapshot_rv) continue;
        if (std::string why = unusable_record(rec); !why.empty()) {
          rv_ = std::max(rv_, rec.at("rv").get<uint64_t>());
          skip(path, line_no, why);
          continue;
        }
        apply(rec, false);  // reads every field before it changes anything
      } catch (const std::exception& e) {
        bad = e.what();
        bad_line_no = line_no;
      }
    }
  }
  const std::string suffix = ".skipped-" + std::to_string(::time(nullptr));
  for (const auto& file : keep) {
    std::error_code ec;
    std::filesystem::copy_file(file, file.string() + suffix, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) {
      *error = "cannot keep a copy of " + file.string() + " (it has records that are skipped): " + ec.message();
      return false;
    }
  }
  return true;
}

bool Store::write_snapshot(std::string* error) {
  std::map<std::string, std::map<std::string, ObjectPtr>> objects;
  std::deque<EventPtr> window;
  uint64_t rv, floor;
  {
    std::lock_guard lock(mutex_);
    objects = objects_;
    window = window_;
    rv = rv_;
    floor = window_floor_;
  }
  auto tmp = options_.dir / "snapshot.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot write " + tmp.string() + ": " + std::strerror(errno);
    return false;
  }
  std::string buf = Json{{"rv", rv}, {"floor", floor}}.dump() + "\n";
  size_t written = 0;
  bool ok = true;
  for (const auto& [resource, items] : objects) {
    for (const auto& [key, obj] : items) {
      auto slash = key.find('/');
      buf += Json{{"r", resource}, {"ns", key.substr(0, slash)}, {"n", key.substr(slash + 1)}, {"o", *obj}}.dump();
      buf += '\n';
      if (buf.size() > (1 << 20)) {
        written += buf.size();
        ok = ok && write_all_fd(fd, buf);
        buf.clear();
      }
    }
  }
  for (const auto& ev : window) {
    buf += Json{{"w", 1}, {"rv", ev->rv}, {"t", ev->type}, {"r", ev->resource}, {"ns", ev->ns}, {"n", ev->name},
                {"o", *ev->object}}.dump();
    buf += '\n';
    if (buf.size() > (1 << 20)) {
      written += buf.size();
      ok = ok && write_all_fd(fd, buf);
      buf.clear();
    }
  }
  written += buf.size();
  ok = ok && write_all_fd(fd, buf) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    *error = "cannot write " + tmp.string() + ": " + std::strerror(errno);
    return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, options_.dir / "snapshot", ec);
  if (ec) {
    *error = "cannot replace " + (options_.dir / "snapshot").string() + ": " + ec.message();
    return false;
  }
  fsync_dir(options_.dir);
  {
    std::lock_guard lock(mutex_);
    snapshot_bytes_ = written;
  }
  return true;
}

void Store::sync_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    sync_cv_.wait_for(lock, options_.sync_interval);
    if (dirty_ && log_fd_ >= 0) {
      dirty_ = false;
      int fd = log_fd_;
      lock.unlock();
      ::fdatasync(fd);
      lock.lock();
    }
    const size_t log_bytes_limit = std::max(options_.compact_log_min_bytes, 2 * snapshot_bytes_);
    if ((log_events_ >= options_.compact_log_after_events || log_bytes_ >= log_bytes_limit) && !stopping_) {
      // Rotate the log, then write a snapshot that covers everything in the old one.
      ::fdatasync(log_fd_);
      ::close(log_fd_);
      std::error_code ec;
      std::filesystem::rename(options_.dir / "log", options_.dir / "log.old", ec);
      log_fd_ = ::open((options_.dir / "log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      log_events_ = 0;
      log_bytes_ = 0;
      lock.unlock();
      std::string error;
      if (write_snapshot(&error)) std::filesystem::remove(options_.dir / "log.old", ec);
      lock.lock();
    }
  }
}

ObjectPtr Store::get_locked(const std::string& resource, const std::string& ns, const std::string& name) const {
  auto r = objects_.find(resource);
  if (r == objects_.end()) return nullptr;
  auto it = r->second.find(key_of(ns, name));
  return it == r->second.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, ObjectPtr>> Store::list_locked(const std::string& resource, const std::string& ns,
                                                                  const std::string& after_key) const {
  std::vector<std::pair<std::string, ObjectPtr>> out;
  auto r = objects_.find(resource);
  if (r == objects_.end()) return out;
  auto it = after_key.empty() ? (ns.empty() ? r->second.begin() : r->second.lower_bound(ns + "/"))
                              : r->second.upper_bound(after_key);
  for (; it != r->second.end(); ++it) {
    if (!ns.empty() && it->first.compare(0, ns.size() + 1, ns + "/") != 0) break;
    out.emplace_back(it->first, it->second);
  }
  return out;
}

std::vector<std::pair<std::string, ObjectPtr>> Store::all_locked() const {
  std::vector<std::pair<std::string, ObjectPtr>> out;
  for (const auto& [resource, items] : objects_)
    for (const auto& [key, obj] : items) out.emplace_back(resource + "|" + key, obj);
  return out;
}

void Store::push_window_locked(EventPtr e) {
  window_bytes_ += event_cost(*e);
  window_.push_back(std::move(e));
  trim_window_locked();
}

void Store::trim_window_locked() {
  while (window_.size() > options_.window_events || (window_.size() > 1 && window_bytes_ > options_.window_bytes)) {
    window_floor_ = window_.front()->rv;
    window_bytes_ -= event_cost(*window_.front());
    window_.pop_front();
  }
}

void Store::append_log_locked(const StoredEvent& e) {
  if (log_fd_ < 0) return;
  // The watch line already holds the serialized object; reuse it rather than dump twice.
  std::string rec = "{\"rv\":" + std::to_string(e.rv) + ",\"t\":\"" + e.type + "\",\"r\":" + Json(e.resource).dump() +
                    ",\"ns\":" + Json(e.ns).dump() + ",\"n\":" + Json(e.name).dump() + ",\"o\":";
  size_t obj_start = e.line.find(",\"object\":") + 10;
  rec.append(e.line, obj_start, e.line.size() - obj_start - 2);  // drop the closing "}\n"
  rec += "}\n";
  write_all_fd(log_fd_, rec);
  ++log_events_;
  log_bytes_ += rec.size();
  dirty_ = true;
}

uint64_t Store::put_locked(const std::string& resource, const std::string& ns, const std::string& name, Json obj,
                           const std::string& type) {
  uint64_t rv = ++rv_;
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  auto ev = std::make_shared<StoredEvent>();
  ev->rv = rv;
  ev->type = type;
  ev->resource = resource;
  ev->ns = ns;
  ev->name = name;
  ev->object = std::make_shared<const Json>(std::move(obj));
  ev->line = make_line(type, *ev->object);
  ObjectPtr& slot = objects_[resource][key_of(ns, name)];
  if (type == "MODIFIED") ev->previous = slot;
  slot = ev->object;
  append_log_locked(*ev);
  push_window_locked(ev);
  cv_.notify_all();
  return rv;
}

uint64_t Store::remove_locked(const std::string& resource, const std::string& ns, const std::string& name) {
  auto r = objects_.find(resource);
  if (r == objects_.end()) return 0;
  auto it = r->second.find(key_of(ns, name));
  if (it == r->second.end()) return 0;
  uint64_t rv = ++rv_;
  Json last = *it->second;
  last["metadata"]["resourceVersion"] = std::to_string(rv);
  r->second.erase(it);
  auto ev = std::make_shared<StoredEvent>();
  ev->rv = rv;
  ev->type = "DELETED";
  ev->resource = resource;
  ev->ns = ns;
  ev->name = name;
  ev->object = std::make_shared<const Json>(std::move(last));
  ev->line = make_line("DELETED", *ev->object);
  append_log_locked(*ev);
  push_window_locked(ev);
  cv_.notify_all();
  return rv;
}

bool Store::events_since_locked(uint64_t since, std::vector<EventPtr>* out) const {
  if (since < window_floor_) return false;
  // Binary search: the window is sorted by rv.
  auto it = std::upper_bound(window_.begin(), window_.end(), since,
                             [](uint64_t v, const EventPtr& e) { return v < e->rv; });
  for (; it != window_.end(); ++it) out->push_back(*it);
  return true;
}

void Store::wait_locked(std::unique_lock<std::mutex>& lock, uint64_t since, std::chrono::milliseconds timeout) {
  cv_.wait_for(lock, timeout, [&] { return rv_ > since || stopping_; });
}

void Store::compact_window() {
  std::lock_guard lock(mutex_);
  window_.clear();
  window_bytes_ = 0;
  window_floor_ = rv_;
  cv_.notify_all();
}

void Store::set_window_events(size_t n) {
  std::lock_guard lock(mutex_);
  options_.window_events = std::max<size_t>(n, 1);
  trim_window_locked();
}

}  // namespace flotilla::devcluster
