#pragma once
// Helpers on Kubernetes objects held as JSON (nlohmann::json): keys, names, resourceVersions.
// Contract: never throw on a malformed object; missing fields read as "".
// The cache key is client-go's MetaNamespaceKeyFunc: "namespace/name", or "name" for a
// cluster-scoped object.
#include <string>

#include <nlohmann/json.hpp>

namespace flotilla::kube {

using Json = nlohmann::json;

std::string object_name(const Json& obj);
std::string object_namespace(const Json& obj);
std::string object_resource_version(const Json& obj);
std::string object_uid(const Json& obj);
std::string object_key(const Json& obj);
std::string make_key(const std::string& ns, const std::string& name);

}  // namespace flotilla::kube
