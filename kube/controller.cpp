#include "kube/controller.h"

#include <thread>

namespace flotilla::kube {

std::string controller_owner_key(const Json& obj, const std::string& owner_kind) {
  if (!obj.is_object() || !obj.contains("metadata")) return "";
  const auto& meta = obj["metadata"];
  auto refs = meta.find("ownerReferences");
  if (refs == meta.end() || !refs->is_array()) return "";
  for (const auto& ref : *refs) {
    if (!ref.is_object() || !ref.value("controller", false)) continue;
    if (ref.value("kind", "") != owner_kind) continue;
    // Owners are in the same namespace (namespaced) or cluster-scoped.
    return make_key(object_namespace(obj), ref.value("name", ""));
  }
  return "";
}

const std::string& cluster_pass_key() {
  static const std::string key("\0cluster", 8);
  return key;
}

Controller::Controller(std::shared_ptr<Client> client, Resource primary, std::string ns,
                       Reconcile reconcile, std::shared_ptr<const Clock> clock)
    : client_(std::move(client)),
      primary_(std::move(primary)),
      ns_(std::move(ns)),
      reconcile_(std::move(reconcile)),
      clock_(std::move(clock)),
      queue_(std::make_unique<WorkQueue>(clock_, default_controller_rate_limiter(clock_))) {}

Controller::~Controller() { queue_->shut_down(); }

Controller& Controller::owns(Resource owned, WatcherOptions options) {
  owned_specs_.emplace_back(std::move(owned), std::move(options));
  return *this;
}

Controller& Controller::watches(Resource resource, Mapper mapper, WatcherOptions options,
                                std::optional<std::string> ns) {
  std::string where = ns ? *ns : ns_;
  watch_specs_.push_back({std::move(resource), std::move(mapper), std::move(options), std::move(where)});
  return *this;
}

Controller& Controller::with_cluster_pass(std::string key) {
  cluster_pass_ = std::move(key);
  return *this;
}

void Controller::queue_cluster_pass() {
  if (cluster_pass_) queue_->add(*cluster_pass_);
}

namespace {

// The mapper's keys for `obj`; nothing when it throws (it runs on the watch thread).
std::vector<std::string> mapped_keys(const Controller::Mapper& mapper, const Json& obj) {
  try {
    return mapper(obj);
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

void Controller::start_watched(Reflector& reflector, const Mapper& mapper) {
  // Objects before a re-list: those gone afterwards were deleted while the watch was down and
  // are mapped from their last state.
  auto before = std::make_shared<std::vector<Json>>();
  reflector.start([this, &reflector, &mapper, before](const WatcherEvent& e) {
    auto enqueue = [&](const Json& obj) {
      for (const std::string& key : mapped_keys(mapper, obj))
        if (!key.empty()) queue_->add(key);
    };
    switch (e.kind) {
      case WatcherEventKind::Init:
        *before = reflector.reader().list();
        return;
      case WatcherEventKind::InitDone: {
        const StoreReader reader = reflector.reader();
        for (const Json& obj : *before)
          if (!reader.get(object_key(obj))) enqueue(obj);
        before->clear();
        break;
      }
      case WatcherEventKind::InitApply:
      case WatcherEventKind::Apply:
      case WatcherEventKind::Delete:
        enqueue(e.object);
        break;
    }
    queue_cluster_pass();
  });
}

Controller& Controller::with_watcher_options(WatcherOptions options) {
  primary_options_ = std::move(options);
  return *this;
}

Controller& Controller::with_workers(int workers) {
  workers_ = std::max(1, workers);
  return *this;
}

Controller& Controller::with_error_policy(ErrorPolicy policy) {
  error_policy_ = std::move(policy);
  return *this;
}

bool Controller::run(std::stop_token stop) {
  Reflector primary(client_, primary_, ns_, primary_options_, clock_);
  std::vector<std::unique_ptr<Reflector>> owned;
  for (auto& [res, opts] : owned_specs_)
    owned.push_back(std::make_unique<Reflector>(client_, res, ns_, opts, clock_));

  // Keys the cache held before a re-list: those missing afterwards were deleted while the
  // watch was down and still deserve a reconcile (client-go's DeletedFinalStateUnknown).
  std::vector<std::string> keys_before_relist;
  primary.start([this, &primary, &keys_before_relist](const WatcherEvent& e) {
    switch (e.kind) {
      case WatcherEventKind::Init:
        keys_before_relist = primary.reader().keys();
        return;
      case WatcherEventKind::InitDone: {
        auto reader = primary.reader();
        for (const auto& key : keys_before_relist)
          if (!reader.get(key)) queue_->add(key);
        keys_before_relist.clear();
        break;
      }
      case WatcherEventKind::InitApply:
      case WatcherEventKind::Apply:
      case WatcherEventKind::Delete:
        queue_->add(object_key(e.object));
        break;
    }
    queue_cluster_pass();
  });
  for (auto& r : owned)
    r->start([this](const WatcherEvent& e) {
      if (e.kind == WatcherEventKind::Init) return;
      const std::string key =
          e.kind == WatcherEventKind::InitDone ? "" : controller_owner_key(e.object, primary_.kind);
      if (!key.empty()) queue_->add(key);
      queue_cluster_pass();
    });
  std::vector<std::unique_ptr<Reflector>> watched;
  for (const WatchSpec& spec : watch_specs_) {
    watched.push_back(std::make_unique<Reflector>(client_, spec.resource, spec.ns, spec.options, clock_));
    start_watched(*watched.back(), spec.mapper);
  }

  auto synced = [&] {
    if (!primary.reader().has_synced()) return false;
    for (auto& r : owned)
      if (!r->reader().has_synced()) return false;
    for (auto& r : watched)
      if (!r->reader().has_synced()) return false;
    return true;
  };
  while (!stop.stop_requested() && !synced()) clock_->sleep_for(std::chrono::milliseconds(10), stop);
  if (stop.stop_requested() && !synced()) {
    queue_->shut_down();
    return false;
  }

  const StoreReader primary_reader = primary.reader();
  std::vector<StoreReader> owned_readers;
  for (auto& r : owned) owned_readers.push_back(r->reader());
  std::vector<StoreReader> watched_readers;
  for (auto& r : watched) watched_readers.push_back(r->reader());
  const ReconcileContext ctx{primary_reader, owned_readers, watched_readers};
  queue_cluster_pass();  // one pass once everything is known, even over empty caches

  std::vector<std::jthread> workers;
  for (int i = 0; i < workers_; ++i)
    workers.emplace_back([this, &ctx] {
      while (auto key = queue_->get()) {
        ++reconciles_;
        Result<Action> result = Error{};
        try {
          result = reconcile_(*key, ctx);
        } catch (const std::exception& ex) {
          Error e;
          e.message = std::string("reconcile threw: ") + ex.what();
          result = e;
        }
        if (result) {
          queue_->forget(*key);
          if (result->requeue) queue_->add_after(*key, *result->requeue);
        } else if (error_policy_) {
          if (auto delay = error_policy_(*key, result.error())) queue_->add_after(*key, *delay);
          else queue_->forget(*key);
        } else {
          queue_->add_rate_limited(*key);
        }
        queue_->done(*key);
      }
    });

  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, stop, [] { return false; });
  queue_->shut_down();
  for (auto& w : workers) w.join();
  return true;
}

}  // namespace flotilla::kube
