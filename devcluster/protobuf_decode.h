// Decoding the Kubernetes protobuf wire format for the few kinds kubectl's typed clients send
// as protobuf (kubectl create namespace / configmap / secret / serviceaccount / token / role /
// rolebinding / clusterrole / clusterrolebinding / deployment, kubectl
// auth can-i).
//
// Guarantees: returns the object as the equivalent JSON, or false with a message naming the
//   kind that is not supported (the server then answers 415 and suggests `kubectl apply -f`).
// Assumes: the body starts with the "k8s\0" magic and wraps a runtime.Unknown.
// Caveats: only ObjectMeta and the fields of Namespace, ConfigMap, Secret and ServiceAccount,
//   Role, ClusterRole, RoleBinding and ClusterRoleBinding, the Deployment fields `kubectl create
//   deployment` sets (any other non-zero field refuses the body, naming it; zero values count as
//   unset, since gogo-protobuf writes every non-pointer field), the specs of SelfSubjectAccessReview,
//   SubjectAccessReview, SelfSubjectRulesReview and
//   TokenRequest are decoded; responses are always JSON (kubectl accepts JSON as well).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace flotilla::devcluster {

bool decode_kubernetes_protobuf(const std::string& body, nlohmann::json* out, std::string* error);

}  // namespace flotilla::devcluster
