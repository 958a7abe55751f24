#include "kube/store.h"

namespace flotilla::kube {

Store::Store() : state_(std::make_shared<State>()) {}

void Store::apply(const WatcherEvent& event) {
  switch (event.kind) {
    case WatcherEventKind::Init:
      buffer_.emplace();
      return;
    case WatcherEventKind::InitApply:
      if (!buffer_) buffer_.emplace();
      (*buffer_)[object_key(event.object)] = event.object;
      return;
    case WatcherEventKind::InitDone: {
      {
        std::unique_lock lock(state_->mu);
        state_->objects = buffer_ ? std::move(*buffer_) : std::map<std::string, Json>{};
      }
      buffer_.reset();
      std::lock_guard lock(state_->sync_mu);
      state_->synced = true;
      state_->synced_cv.notify_all();
      return;
    }
    case WatcherEventKind::Apply: {
      std::unique_lock lock(state_->mu);
      state_->objects[object_key(event.object)] = event.object;
      return;
    }
    case WatcherEventKind::Delete: {
      std::unique_lock lock(state_->mu);
      state_->objects.erase(object_key(event.object));
      return;
    }
  }
}

void Store::set_resource_version(const std::string& rv) {
  std::unique_lock lock(state_->mu);
  state_->resource_version = rv;
}

StoreReader Store::reader() const { return StoreReader(state_); }

std::optional<Json> StoreReader::get(const std::string& key) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->objects.find(key);
  if (it == state_->objects.end()) return std::nullopt;
  return it->second;
}

std::optional<Json> StoreReader::get(const std::string& ns, const std::string& name) const {
  return get(make_key(ns, name));
}

std::vector<Json> StoreReader::list() const {
  std::shared_lock lock(state_->mu);
  std::vector<Json> out;
  out.reserve(state_->objects.size());
  for (const auto& [key, obj] : state_->objects) out.push_back(obj);
  return out;
}

void StoreReader::for_each(const std::function<void(const Json&)>& visit) const {
  std::shared_lock lock(state_->mu);
  for (const auto& [key, obj] : state_->objects) visit(obj);
}

std::vector<Json> StoreReader::list_namespace(const std::string& ns) const {
  std::shared_lock lock(state_->mu);
  std::vector<Json> out;
  for (const auto& [key, obj] : state_->objects)
    if (object_namespace(obj) == ns) out.push_back(obj);
  return out;
}

std::vector<std::string> StoreReader::keys() const {
  std::shared_lock lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [key, obj] : state_->objects) out.push_back(key);
  return out;
}

size_t StoreReader::size() const {
  std::shared_lock lock(state_->mu);
  return state_->objects.size();
}

std::string StoreReader::resource_version() const {
  std::shared_lock lock(state_->mu);
  return state_->resource_version;
}

bool StoreReader::has_synced() const {
  std::lock_guard lock(state_->sync_mu);
  return state_->synced;
}

bool StoreReader::wait_synced(std::chrono::milliseconds timeout) const {
  const auto& st = *state_;
  std::unique_lock lock(st.sync_mu);
  return st.synced_cv.wait_for(lock, timeout, [&] { return st.synced; });
}

}  // namespace flotilla::kube
