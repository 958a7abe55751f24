// Small helpers for Kubernetes-shaped JSON: Status errors, timestamps, UIDs, object keys and a
// JSONPath subset for printer columns.
//
// Guarantees: api_error() builds a metav1.Status the way kube-apiserver does (kind, apiVersion,
//   status Failure, message, reason, details, code) so clients can decode it as one.
// Assumes: objects are nlohmann::json with the usual metadata layout.
// Caveats: jsonpath_eval() supports `.a.b`, `[N]`, `[*]` and `[?(@.k=="v")]`, which is what
//   printer columns use; not the full JSONPath language.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace flotilla::devcluster {

using Json = nlohmann::json;

struct Cause {
  std::string field;    // e.g. "spec.replicas"
  std::string reason;   // e.g. "FieldValueInvalid"
  std::string message;
};

struct ApiError {
  int code = 500;
  std::string reason;   // NotFound, AlreadyExists, Conflict, Invalid, BadRequest, ...
  std::string message;
  std::string kind;     // details.kind
  std::string group;    // details.group
  std::string name;     // details.name
  std::vector<Cause> causes;
};

Json status_json(const ApiError& e);
ApiError not_found(const std::string& group, const std::string& plural, const std::string& name);
ApiError already_exists(const std::string& group, const std::string& plural, const std::string& name);
ApiError conflict(const std::string& group, const std::string& plural, const std::string& name,
                  const std::string& why);
ApiError bad_request(const std::string& message);
ApiError invalid(const std::string& group, const std::string& kind, const std::string& name,
                 std::vector<Cause> causes);

std::string now_rfc3339();               // "2026-01-02T03:04:05Z"
std::string rfc3339(long long unix_seconds);
long long parse_rfc3339(const std::string& text);  // -1 when malformed
std::string new_uid();                   // random RFC 4122 v4
std::string random_hex(int bytes);
std::string random_suffix(int n);        // lowercase alnum for generateName

// Values selected by a JSONPath-like expression (JSON null when nothing matches).
std::vector<Json> jsonpath_eval(const Json& object, const std::string& path);
std::string base64_encode(const std::string& in);
std::string base64_decode(const std::string& in);  // skips characters outside the alphabet

// "5m", "3h", "12d" like kubectl's age column.
std::string human_age(long long seconds);

}  // namespace flotilla::devcluster
