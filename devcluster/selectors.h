// Label and field selectors as the Kubernetes API parses them.
//
// Guarantees: parse_* return false with a message naming the bad term; matching follows the
//   Kubernetes semantics (`!=` and `notin` match objects without the label).
// Assumes: label selectors use =, ==, !=, in, notin, exists (`k`) and not-exists (`!k`);
//   field selectors use =, ==, != on a dotted path into the object; which paths a resource
//   accepts is kube-apiserver's list (supported_field_selectors), so a selector that works here
//   works on a real cluster.
// Caveats: no set-based syntax for fields (neither does Kubernetes).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace flotilla::devcluster {

struct Requirement {
  enum class Op { equals, not_equals, in, not_in, exists, not_exists } op;
  std::string key;
  std::vector<std::string> values;
};

struct LabelSelector {
  std::vector<Requirement> requirements;
  bool matches(const nlohmann::json& labels) const;  // labels: object or null
  bool empty() const { return requirements.empty(); }
};

struct FieldSelector {
  std::vector<Requirement> requirements;  // equals / not_equals only; key is a dotted path
  bool matches(const nlohmann::json& object) const;
  bool empty() const { return requirements.empty(); }
};

// Kubernetes label syntax (apimachinery validation): "" when valid, else kube-apiserver's message.
// Keys: an optional DNS-subdomain prefix (≤ 253) and '/', then a name of ≤ 63 alphanumerics,
// '-', '_', '.' starting and ending alphanumeric. Values: "" or such a name.
std::string label_key_problem(const std::string& key);
std::string label_value_problem(const std::string& value);
// Also refuses keys and values that are not valid label syntax (kube-apiserver does).
bool parse_label_selector(const std::string& text, LabelSelector* out, std::string* error);
bool parse_field_selector(const std::string& text, FieldSelector* out, std::string* error);
// The fields kube-apiserver v1.32 lets a list/watch of this resource select on:
// metadata.name, metadata.namespace, plus the type's own (pods: spec.nodeName, status.phase, ...;
// custom resources: the CRD version's selectableFields).
std::vector<std::string> supported_field_selectors(const std::string& group, const std::string& plural,
                                                   const std::vector<std::string>& selectable_fields);
// "" when every field of `selector` is supported, else the 400 message naming the first one that
// is not and the ones that are.
std::string unsupported_field_selector(const FieldSelector& selector, const std::vector<std::string>& supported);
// metav1.LabelSelector (matchLabels + matchExpressions) as used in specs.
bool label_selector_from_json(const nlohmann::json& selector, LabelSelector* out, std::string* error);

}  // namespace flotilla::devcluster
