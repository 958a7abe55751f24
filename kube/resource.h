#pragma once
// kube::Resource — one resource type of the API (group, version, plural, scope) and its REST
// paths, as the API server lays them out:
//   core:   /api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
//   groups: /apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
// Contract: a cluster-scoped resource ignores the namespace; an empty namespace on a namespaced
// resource means "all namespaces" (valid for list and watch only).
#include <string>

namespace flotilla::kube {

struct Resource {
  std::string group;    // "" for the core group
  std::string version;  // "v1"
  std::string plural;   // "pods"
  std::string kind;     // "Pod" (used to fill in apiVersion/kind on create)
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  std::string path(const std::string& ns, const std::string& name = "",
                   const std::string& subresource = "") const;
};

namespace resources {
extern const Resource namespaces;
extern const Resource nodes;
extern const Resource pods;
extern const Resource services;
extern const Resource configmaps;
extern const Resource secrets;
extern const Resource events;
extern const Resource leases;
extern const Resource custom_resource_definitions;
}  // namespace resources

}  // namespace flotilla::kube
