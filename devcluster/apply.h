// The subset of server-side apply (PATCH with application/apply-patch+yaml) that Helm 4 and
// `kubectl apply --server-side` need: create when absent, otherwise merge the applied
// configuration into the live object, and remove what the same field manager applied last
// time but no longer sends.
//
// Guarantees: apply_configuration() returns the live object with every field of `applied`
//   set (objects merged key by key, lists and scalars replaced whole), and every field that
//   `previous_fields` (this manager's last applied field set) names but `applied` no longer
//   has removed; applied_field_set() is that field set in managedFields' FieldsV1 shape
//   ({"f:spec": {"f:replicas": {}}}), kept in metadata.managedFields under the manager.
// Assumes: the caller has checked fieldManager is set (kube-apiserver answers 422 without one)
//   and decodes the result as for an update (typed decode, defaults, validation).
// Caveats (differences from kube-apiserver): every apply is forced: no conflicts are detected
//   between managers (force=true semantics always); lists are atomic (a list is replaced as a
//   whole, where kube-apiserver merges lists of type map, such as containers, by key); fields
//   set by other managers (kubectl edit, controllers) are kept unless this manager applied
//   them before; managedFields entries of non-apply writers are not recorded.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace flotilla::devcluster {

// The body of an apply patch: JSON, or YAML (one document). False with *error on malformed.
bool parse_apply_body(const std::string& body, nlohmann::json* out, std::string* error);

nlohmann::json applied_field_set(const nlohmann::json& applied);

nlohmann::json apply_configuration(const nlohmann::json& live, const nlohmann::json& applied,
                                   const nlohmann::json& previous_fields);

// The previous field set of `manager`'s Apply entry in metadata.managedFields (null if none),
// and `object` with that entry replaced by one holding `fields`.
nlohmann::json managed_fields_of(const nlohmann::json& object, const std::string& manager);
void set_managed_fields(nlohmann::json& object, const std::string& manager, const nlohmann::json& fields,
                        const std::string& api_version, const std::string& now);

}  // namespace flotilla::devcluster
