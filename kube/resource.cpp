#include "kube/resource.h"

namespace flotilla::kube {

std::string Resource::path(const std::string& ns, const std::string& name,
                           const std::string& subresource) const {
  std::string out = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) out += "/namespaces/" + ns;
  out += "/" + plural;
  if (!name.empty()) {
    out += "/" + name;
    if (!subresource.empty()) out += "/" + subresource;
  }
  return out;
}

namespace resources {
const Resource namespaces{"", "v1", "namespaces", "Namespace", false};
const Resource nodes{"", "v1", "nodes", "Node", false};
const Resource pods{"", "v1", "pods", "Pod", true};
const Resource services{"", "v1", "services", "Service", true};
const Resource configmaps{"", "v1", "configmaps", "ConfigMap", true};
const Resource secrets{"", "v1", "secrets", "Secret", true};
const Resource events{"", "v1", "events", "Event", true};
const Resource leases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const Resource custom_resource_definitions{"apiextensions.k8s.io", "v1",
                                           "customresourcedefinitions",
                                           "CustomResourceDefinition", false};
}  // namespace resources

}  // namespace flotilla::kube
