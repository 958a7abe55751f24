// The resource types devcluster serves: the built-in ones and those its CRDs define.
//
// Guarantees: lookups by (group, version, plural), by short name / singular / kind, and by
//   (group, kind); CRD types are rebuilt from the stored CRD objects with rebuild_crds().
// Assumes: callers serialise access (the API holds the store lock around registry changes).
// Caveats: every served version of a CRD shares one storage (no conversion webhooks: objects
//   are served with the requested apiVersion and otherwise unchanged).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flotilla::devcluster {

struct ResourceType {
  std::string group;     // "" for core
  std::string version;   // "v1"
  std::string plural;    // "pods"
  std::string singular;  // "pod"
  std::string kind;      // "Pod"
  bool namespaced = true;
  bool has_status = false;
  bool is_crd = false;
  bool create_only = false;  // access reviews: POST is answered, nothing is stored
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::vector<std::string> subresources;  // "status", "binding", "log", ...
  nlohmann::json schema;           // CRD openAPIV3Schema (null for built-ins)
  nlohmann::json printer_columns;  // CRD additionalPrinterColumns (null = Name + Age)
  std::vector<std::string> selectable_fields;  // CRD selectableFields ("spec.color"); built-ins: see selectors.h

  std::string storage_key() const { return group + "/" + plural; }
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

class Registry {
 public:
  Registry();
  const ResourceType* find(const std::string& group, const std::string& version, const std::string& plural) const;
  const ResourceType* find_kind(const std::string& group, const std::string& kind) const;
  // Replaces every CRD-defined type with those of the given CRD objects (established ones).
  void rebuild_crds(const std::vector<nlohmann::json>& crds);
  const std::vector<ResourceType>& types() const { return types_; }
  // Group → versions in preference order, core excluded.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups() const;
  uint64_t generation() const { return generation_; }  // bumps when the type set changes

 private:
  std::vector<ResourceType> types_;
  uint64_t generation_ = 1;
};

}  // namespace flotilla::devcluster
