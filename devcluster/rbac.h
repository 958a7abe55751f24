// RBAC as kube-apiserver enforces it: what a request asks (verb, API group, resource,
// subresource, name, namespace, or a non-resource path), which stored rules grant it, and the
// 403 message when none does.
//
// Guarantees: request_attributes() maps a request like kube-apiserver's RequestInfoFactory:
//   GET on a collection is `list` (`watch` with ?watch=true), GET on a name is `get` (also with
//   ?watch=true, as in Kubernetes), POST `create`, PUT `update`, PATCH `patch`, DELETE on a
//   name `delete` and on a collection `deletecollection`; a list/watch whose fieldSelector
//   pins metadata.name carries that name; `namespaces/<n>` is in namespace n; paths outside
//   /api/v1/... and /apis/<g>/<v>/... (discovery, /openapi, /version) are non-resource
//   requests with the lower-cased HTTP method as verb.
//   authorize() grants a request when a rule reachable from the user allows it: every
//   ClusterRoleBinding naming the user (User by name, Group by membership, ServiceAccount by
//   namespace and name), and in the request's namespace every RoleBinding naming the user, its
//   roleRef a Role of that namespace or a ClusterRole (granted in that namespace only). A rule
//   allows when its verbs, apiGroups and resources match (`*` everywhere; a resource matches
//   `pods`, `pods/status`, or `*/status` for subresources; `pods` alone does not cover
//   `pods/status`), and its resourceNames are empty or contain the request's name (so a rule
//   with resourceNames never allows list, watch, create or deletecollection on a collection);
//   non-resource rules match nonResourceURLs exactly or by a trailing `*` prefix. Members of
//   `system:masters` may do everything. A binding to a missing role adds kube-apiserver's
//   `RBAC: role.rbac.authorization.k8s.io "x" not found` to the refusal.
// Assumes: roles and bindings are stored objects (rbac.authorization.k8s.io/v1 JSON).
// Caveats: no aggregated ClusterRoles (aggregationRule is stored, not evaluated), no
//   escalation checks on Role/RoleBinding writes (`escalate`/`bind` verbs are never asked).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devcluster/api_types.h"
#include "devcluster/service_accounts.h"

namespace flotilla::devcluster {

class Store;

struct RequestAttributes {
  bool resource_request = false;
  std::string verb;  // get list watch create update patch delete deletecollection; or get/post/... for paths
  std::string api_group, api_version, resource, subresource, name, ns;
  std::string path;  // non-resource requests
};

// query_param(name) returns the decoded query parameter or "".
RequestAttributes request_attributes(const std::string& method, const std::string& path,
                                     const std::function<std::string(const std::string&)>& query_param);

struct RbacObjects {
  std::vector<nlohmann::json> roles, cluster_roles, role_bindings, cluster_role_bindings;
};
RbacObjects load_rbac_objects(Store& store);  // takes the store lock

struct Decision {
  bool allowed = false;
  std::string reason;  // why not (missing roles), "" otherwise
};
Decision authorize(const RbacObjects& rbac, const UserInfo& user, const RequestAttributes& request);

// The rules that apply to `user` in `ns` (cluster-wide ones included), for
// SelfSubjectRulesReview: {resourceRules: [...], nonResourceRules: [...]}.
nlohmann::json rules_for(const RbacObjects& rbac, const UserInfo& user, const std::string& ns);

// kube-apiserver's 403: `pods "x" is forbidden: User "u" cannot get resource "pods" in API
// group "" in the namespace "ns"` (plus ": <reason>" when there is one).
ApiError forbidden(const UserInfo& user, const RequestAttributes& request, const std::string& reason);

// The ClusterRoles and ClusterRoleBindings every Kubernetes cluster starts with that matter
// here (cluster-admin, system:discovery, system:basic-user, system:public-info-viewer), as
// objects to create when absent.
std::vector<nlohmann::json> bootstrap_cluster_roles();
std::vector<nlohmann::json> bootstrap_cluster_role_bindings();

}  // namespace flotilla::devcluster
