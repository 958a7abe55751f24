#include "devcluster/registry.h"

#include <algorithm>

namespace flotilla::devcluster {

namespace {
ResourceType builtin(std::string group, std::string version, std::string plural, std::string singular,
                     std::string kind, bool namespaced, bool has_status, std::vector<std::string> short_names,
                     std::vector<std::string> subresources = {}) {
  ResourceType t;
  t.group = std::move(group);
  t.version = std::move(version);
  t.plural = std::move(plural);
  t.singular = std::move(singular);
  t.kind = std::move(kind);
  t.namespaced = namespaced;
  t.has_status = has_status;
  t.short_names = std::move(short_names);
  t.subresources = std::move(subresources);
  if (has_status) t.subresources.insert(t.subresources.begin(), "status");
  return t;
}
}  // namespace

Registry::Registry() {
  types_ = {
      builtin("", "v1", "namespaces", "namespace", "Namespace", false, true, {"ns"}),
      builtin("", "v1", "nodes", "node", "Node", false, true, {"no"}),
      builtin("", "v1", "pods", "pod", "Pod", true, true, {"po"}, {"binding", "log"}),
      builtin("", "v1", "services", "service", "Service", true, true, {"svc"}),
      builtin("", "v1", "configmaps", "configmap", "ConfigMap", true, false, {"cm"}),
      builtin("", "v1", "secrets", "secret", "Secret", true, false, {}),
      builtin("", "v1", "events", "event", "Event", true, false, {"ev"}),
      builtin("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, {"sa"}, {"token"}),
      builtin("coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, {}),
      builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
              "CustomResourceDefinition", false, true, {"crd", "crds"}),
      builtin("apps", "v1", "deployments", "deployment", "Deployment", true, true, {"deploy"}, {"scale"}),
      builtin("apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, true, {"rs"}),
      builtin("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, true, {"pdb"}),
      builtin("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, {}),
      builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true, false, {}),
      builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false, false, {}),
      builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false,
              false, {}),
  };
  for (auto& t : types_)
    if (t.plural == "deployments" || t.plural == "replicasets") t.categories = {"all"};
  types_[2].categories = {"all"};
  types_[3].categories = {"all"};
  // Answered from the RBAC rules (rbac.h), never stored (kubectl auth can-i).
  // kubectl auth whoami: who the caller is (authentication.k8s.io), answered, never stored.
  types_.push_back(builtin("authentication.k8s.io", "v1", "selfsubjectreviews", "", "SelfSubjectReview", false, false, {}));
  types_.back().create_only = true;
  for (auto [plural, kind] : {std::pair{"selfsubjectaccessreviews", "SelfSubjectAccessReview"},
                              std::pair{"selfsubjectrulesreviews", "SelfSubjectRulesReview"},
                              std::pair{"subjectaccessreviews", "SubjectAccessReview"}}) {
    types_.push_back(builtin("authorization.k8s.io", "v1", plural, "", kind, false, false, {}));
    types_.back().create_only = true;
  }
}

const ResourceType* Registry::find(const std::string& group, const std::string& version,
                                   const std::string& plural) const {
  for (const auto& t : types_)
    if (t.group == group && t.version == version && t.plural == plural) return &t;
  return nullptr;
}

const ResourceType* Registry::find_kind(const std::string& group, const std::string& kind) const {
  for (const auto& t : types_)
    if (t.group == group && t.kind == kind) return &t;
  return nullptr;
}

void Registry::rebuild_crds(const std::vector<nlohmann::json>& crds) {
  std::erase_if(types_, [](const ResourceType& t) { return t.is_crd; });
  for (const auto& crd : crds) {
    const auto& spec = crd.value("spec", nlohmann::json::object());
    const auto& names = spec.value("names", nlohmann::json::object());
    for (const auto& v : spec.value("versions", nlohmann::json::array())) {
      if (!v.value("served", true)) continue;
      ResourceType t;
      t.group = spec.value("group", "");
      t.version = v.value("name", "");
      t.plural = names.value("plural", "");
      t.singular = names.value("singular", "");
      if (t.singular.empty()) {
        t.singular = names.value("kind", "");
        std::transform(t.singular.begin(), t.singular.end(), t.singular.begin(), ::tolower);
      }
      t.kind = names.value("kind", "");
      t.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
      t.is_crd = true;
      t.short_names = names.value("shortNames", std::vector<std::string>{});
      t.categories = names.value("categories", std::vector<std::string>{});
      auto sub = v.value("subresources", nlohmann::json::object());
      t.has_status = sub.contains("status");
      if (t.has_status) t.subresources.push_back("status");
      if (sub.contains("scale")) t.subresources.push_back("scale");
      if (v.contains("schema") && v["schema"].contains("openAPIV3Schema")) t.schema = v["schema"]["openAPIV3Schema"];
      if (v.contains("additionalPrinterColumns")) t.printer_columns = v["additionalPrinterColumns"];
      for (const auto& f : v.value("selectableFields", nlohmann::json::array())) {
        std::string path = f.is_object() ? f.value("jsonPath", "") : "";
        if (!path.empty() && path[0] == '.') path.erase(0, 1);
        if (!path.empty()) t.selectable_fields.push_back(path);
      }
      types_.push_back(std::move(t));
    }
  }
  ++generation_;
}

std::vector<std::pair<std::string, std::vector<std::string>>> Registry::groups() const {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& t : types_) {
    if (t.group.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == t.group; });
    if (it == out.end()) {
      out.push_back({t.group, {t.version}});
    } else if (std::find(it->second.begin(), it->second.end(), t.version) == it->second.end()) {
      it->second.push_back(t.version);
    }
  }
  return out;
}

}  // namespace flotilla::devcluster
