#pragma once
// Helpers on Kubernetes objects held as JSON (nlohmann::json): keys, names, resourceVersions.
// Contract: never throw on a malformed object; missing fields read as "".
// The cache key is client-go's MetaNamespaceKeyFunc: "namespace/name", or "name" for a
// cluster-scoped object.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::kube {

using Json = nlohmann::json;

std::string object_name(const Json& obj);
std::string object_namespace(const Json& obj);
std::string object_resource_version(const Json& obj);
std::string object_uid(const Json& obj);
std::string object_key(const Json& obj);
std::string make_key(const std::string& ns, const std::string& name);
// The string at object[key]; "" when `object` is not an object, or the field is absent or not a
// string (a status or spec written by hand may hold anything).
std::string string_field(const Json& object, const char* key);

// Pods, as both devcluster's kubelet and the operator read them (they must agree on what a pod
// holds). Assume an object as the API server returns it (spec and containers are objects).
// The nvidia.com/gpu quantity of each container, as written: its limit, else its request
// (Kubernetes takes a lone limit of an extended resource as the request too); null when neither.
// The caller parses the quantities, so each side keeps its own rule for odd values.
std::vector<Json> pod_gpu_quantities(const Json& pod);
// Succeeded or Failed: the pod's containers will not run again and it holds no GPU.
bool pod_finished(const Json& pod);

}  // namespace flotilla::kube
