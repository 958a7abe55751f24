// The Kubernetes API semantics devcluster implements, independent of HTTP: create, get,
// update (main resource or status subresource), patch (merge, JSON, strategic), delete with
// finalizers and grace periods, pod binding, and the CRD lifecycle.
//
// Guarantees: every write happens under the store lock, so optimistic concurrency (409 on a
//   stale metadata.resourceVersion) is exact; metadata.generation bumps only when something
//   outside metadata (and outside status, for types with a status subresource) changes; a no-op
//   update writes nothing and returns the current object; objects with finalizers get a
//   deletionTimestamp and are removed when the last finalizer goes; errors are ApiError
//   values that render as metav1.Status.
// Assumes: the registry passed in is swapped copy-on-write when CRDs change (registry()).
// Caveats: no admission webhooks (authorization is http_api.h's, through rbac.h); server-side
//   apply is the subset apply.h describes; pod spec is mutable,
//   Foreground propagation is treated as Background.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "devcluster/api_types.h"
#include "devcluster/registry.h"
#include "devcluster/store.h"

namespace flotilla::devcluster {

struct Outcome {
  int code = 200;
  Json object;
  std::optional<ApiError> error;
  std::vector<std::string> warnings;
  bool ok() const { return !error.has_value(); }
  static Outcome fail(ApiError e) {
    Outcome o;
    o.code = e.code;
    o.error = std::move(e);
    return o;
  }
};

struct WriteOptions {
  bool dry_run = false;
  std::string field_validation;  // "Strict", "Warn", "Ignore" or "" (= Warn for kubectl)
  // A controller's own write (kubelet, scheduler, GC via mutate/bind): skips the typed decode of
  // built-in kinds, so a status can still be written on an object stored before it existed.
  bool internal = false;
  // fieldManager query parameter; required for server-side apply (apply.h).
  std::string field_manager;
  // Set by apply when the object is absent: the field set to record in managedFields.
  Json applied_fields;
};

struct DeleteOptions {
  std::optional<long long> grace_seconds;
  std::string propagation;  // Background (default), Foreground (treated as Background), Orphan
  std::string precondition_uid;
  std::string precondition_rv;
  bool dry_run = false;
};

class Api {
 public:
  explicit Api(Store& store);

  std::shared_ptr<const Registry> registry() const;
  Store& store() { return store_; }

  Outcome get(const ResourceType& type, const std::string& ns, const std::string& name);
  Outcome create(const ResourceType& type, const std::string& ns, Json body, const WriteOptions& opts);
  Outcome update(const ResourceType& type, const std::string& ns, const std::string& name, Json body,
                 bool status_subresource, const WriteOptions& opts);
  Outcome patch(const ResourceType& type, const std::string& ns, const std::string& name,
                const std::string& content_type, const std::string& body, bool status_subresource,
                const WriteOptions& opts);
  Outcome remove(const ResourceType& type, const std::string& ns, const std::string& name, const DeleteOptions& opts);
  Outcome bind_pod(const std::string& ns, const std::string& name, const Json& binding);

  // For controllers: read-modify-write under the store lock. `fn` edits a copy of the object
  // and returns false to leave it unchanged. Runs the update path (status included when asked).
  Outcome mutate(const ResourceType& type, const std::string& ns, const std::string& name,
                 const std::function<bool(Json&)>& fn, bool status_subresource = true);
  // Removes an object now, ignoring grace periods (finalizers still hold it).
  Outcome force_remove(const ResourceType& type, const std::string& ns, const std::string& name);

  // Rebuilds CRD types from the store (after load); takes the lock.
  void reload_crds();
  // Every namespace has a ServiceAccount `default` (created with the namespace; this fills in
  // namespaces stored before devcluster did that). Takes the lock.
  void ensure_default_service_accounts();

 private:
  Outcome apply(const ResourceType& type, const std::string& ns, const std::string& name, Json applied,
                bool status_subresource, const WriteOptions& opts);
  Outcome update_locked(const ResourceType& type, const std::string& ns, const std::string& name, Json body,
                        bool status_subresource, const WriteOptions& opts, const ObjectPtr& current);
  Outcome remove_now_locked(const ResourceType& type, const std::string& ns, const std::string& name);
  std::optional<ApiError> check_crd_object(const ResourceType& type, Json& obj, const WriteOptions& opts,
                                           std::vector<std::string>* warnings) const;
  void reload_crds_locked();
  void ensure_default_service_account_locked(const std::string& ns);
  const ResourceType* storage_type(const std::string& storage_key) const;

  Store& store_;
  mutable std::mutex registry_mutex_;
  std::shared_ptr<const Registry> registry_;
};

// The type stored under "group/plural", from a registry (any served version).
const ResourceType* type_for_storage(const Registry& registry, const std::string& storage_key);

}  // namespace flotilla::devcluster
