// Typed decoding of the built-in kinds devcluster serves, the way kube-apiserver's Go decoder
// treats a JSON body: a compact field type table per kind (ObjectMeta, Pod spec/containers/env/
// resources/status, ConfigMap, Secret, Node, Namespace, Event, Lease, Service, ServiceAccount,
// CustomResourceDefinition with its JSONSchemaProps) checked before anything reads the object.
//
// Guarantees: decode_builtin() either returns an ApiError 400 BadRequest whose message is
//   kube-apiserver's (`Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal
//   number into Go struct field Container.spec.containers.command of type string`, with a
//   cause naming the field path with indices), or leaves an object in which every field the
//   table knows has its declared JSON type: strings are strings, int32/int64 are integers in
//   range, quantities are strings in Kubernetes quantity syntax (JSON numbers are rewritten
//   as strings, as Go re-encodes them), Secret data is valid base64; `null` fields are removed
//   (Go's zero value, omitted on output) and null elements of typed lists/maps become the zero
//   value. Fields the table does not know are removed and their paths ("spec.foo",
//   "spec.containers[0].bar") returned, so callers warn (`Warning:` header) or, under
//   fieldValidation=Strict, refuse with 400 `strict decoding error: unknown field "spec.foo"`.
//   The walk is linear in the object's size.
// Assumes: the body is already a parsed JSON value no deeper than kMaxJsonNestingDepth
//   (json_limits.h); `kind` is a built-in kind (CRD-defined kinds are checked by schema.h).
// Caveats: fields the table marks `any` (volumes, probes, securityContext, affinity other than
//   node affinity, ...) are kept as sent without type checks, since devcluster never reads them;
//   metav1.Time fields are checked to be strings, not parsed; duplicate JSON keys are not
//   detected (nlohmann keeps the last).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "devcluster/api_types.h"

namespace flotilla::devcluster {

// True when `kind` has a field table (every built-in kind devcluster stores).
bool has_builtin_schema(const std::string& kind);

// Decodes `object` (a JSON object) as `kind` of `api_version`; see the contract above. Unknown
// field paths are appended to *unknown_fields.
std::optional<ApiError> decode_builtin(const std::string& kind, const std::string& api_version, nlohmann::json& object,
                                       std::vector<std::string>* unknown_fields);

// For custom resources: apiVersion, kind and metadata (as ObjectMeta) only; the rest is the
// CRD schema's job (schema.h).
std::optional<ApiError> decode_custom_resource_meta(const std::string& kind, const std::string& api_version,
                                                   nlohmann::json& object, std::vector<std::string>* unknown_fields);

// The strict decoding error for unknown fields (400), as kube-apiserver words it.
ApiError strict_decoding_error(const std::vector<std::string>& unknown_fields);

}  // namespace flotilla::devcluster
