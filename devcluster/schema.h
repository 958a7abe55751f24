// Structural OpenAPI v3 schemas of CustomResourceDefinitions: defaulting, pruning and validation.
//
// Guarantees: errors carry the field path ("spec.workers[1].gpus") and a message in the
//   API server's wording; defaults are applied before validation, as kube-apiserver does;
//   unknown fields are pruned unless x-kubernetes-preserve-unknown-fields or
//   additionalProperties allow them, and reported so fieldValidation=Strict can refuse them.
// Assumes: the schema is structural (every node has a type, or preserve-unknown-fields).
// Caveats: supported keywords: type, properties, required, items, additionalProperties, enum,
//   minimum/maximum (+exclusive), minLength/maxLength, minItems/maxItems, pattern (Go/RE2
//   syntax, linear-time matching), nullable, default, format int32/int64, x-kubernetes-int-or-string,
//   x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource. No CEL rules
//   (x-kubernetes-validations), no oneOf/anyOf/allOf/not.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "devcluster/api_types.h"

namespace flotilla::devcluster {

// Applies the schema's defaults to a full object (apiVersion/kind/metadata are left alone).
void apply_schema_defaults(const nlohmann::json& schema, nlohmann::json& object);
// Removes fields the schema does not allow; their paths go to *pruned.
void prune_unknown_fields(const nlohmann::json& schema, nlohmann::json& object, std::vector<std::string>* pruned);
// Checks a CRD's openAPIV3Schema itself (at CRD create and update), so a schema that cannot
// be enforced is refused instead of silently ignored: every `type` is one of array, boolean,
// integer, number, object, string; minimum <= maximum, minLength <= maxLength, minItems <=
// maxItems, lengths and counts >= 0; every `pattern` compiles. `path` prefixes the causes
// ("spec.versions[0].schema.openAPIV3Schema"). Types of keywords (required: "spec") are the
// typed decode's job (builtin_schema.h).
std::vector<Cause> validate_schema_definition(const nlohmann::json& schema, const std::string& path);
// Validates a full object; metadata is not validated against the schema.
std::vector<Cause> validate_against_schema(const nlohmann::json& schema, const nlohmann::json& object);

}  // namespace flotilla::devcluster
