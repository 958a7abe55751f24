#include "devcluster/selectors.h"

#include <algorithm>
#include <cstring>
#include <regex>
#include <nlohmann/json.hpp>

namespace flotilla::devcluster {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> split_terms(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
  return out;
}

bool parse_equality(const std::string& term, Requirement* r) {
  // "!=" and "==" before "=", which both contain.
  static const std::pair<const char*, Requirement::Op> ops[] = {
      {"!=", Requirement::Op::not_equals}, {"==", Requirement::Op::equals}, {"=", Requirement::Op::equals}};
  for (const auto& [text, op] : ops) {
    size_t p = term.find(text);
    if (p == std::string::npos) continue;
    r->op = op;
    r->key = trim(term.substr(0, p));
    r->values = {trim(term.substr(p + std::strlen(text)))};
    return true;
  }
  return false;
}

std::string field_value(const nlohmann::json& object, const std::string& path, bool* present) {
  const nlohmann::json* node = &object;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!node->is_object() || !node->contains(key)) {
      *present = false;
      return "";
    }
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  *present = true;
  if (node->is_string()) return node->get<std::string>();
  if (node->is_null()) return "";
  return node->dump();
}

}  // namespace

namespace {

bool qualified_name_part(const std::string& s) {
  static const std::regex re("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$");
  return !s.empty() && s.size() <= 63 && std::regex_match(s, re);
}

const char* kNameRule =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

}  // namespace

std::string label_key_problem(const std::string& key) {
  std::string name = key, prefix;
  if (auto slash = key.find('/'); slash != std::string::npos) {
    prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    static const std::regex dns("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    if (prefix.empty() || prefix.size() > 253 || !std::regex_match(prefix, dns))
      return "Invalid value: \"" + key + "\": prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters";
  }
  if (name.size() > 63) return "Invalid value: \"" + key + "\": name part must be no more than 63 characters";
  if (!qualified_name_part(name)) return "Invalid value: \"" + key + "\": name part " + kNameRule;
  return "";
}

std::string label_value_problem(const std::string& value) {
  if (value.empty()) return "";
  if (value.size() > 63) return "Invalid value: \"" + value + "\": must be no more than 63 characters";
  if (!qualified_name_part(value))
    return "Invalid value: \"" + value + "\": a valid label must be an empty string or " + kNameRule;
  return "";
}

bool parse_label_selector(const std::string& text, LabelSelector* out, std::string* error) {
  out->requirements.clear();
  if (trim(text).empty()) return true;
  for (const std::string& term : split_terms(text)) {
    if (term.empty()) {
      *error = "unable to parse requirement: empty term in label selector \"" + text + "\"";
      return false;
    }
    Requirement r;
    auto open = term.find('(');
    if (open != std::string::npos) {
      if (term.back() != ')') {
        *error = "unable to parse requirement: missing ')' in \"" + term + "\"";
        return false;
      }
      std::string head = trim(term.substr(0, open));
      auto sp = head.find_last_of(" \t");
      if (sp == std::string::npos) {
        *error = "unable to parse requirement: expected 'key in (...)' in \"" + term + "\"";
        return false;
      }
      std::string op = trim(head.substr(sp + 1));
      r.key = trim(head.substr(0, sp));
      if (op == "in") r.op = Requirement::Op::in;
      else if (op == "notin") r.op = Requirement::Op::not_in;
      else {
        *error = "unable to parse requirement: unknown operator '" + op + "' in \"" + term + "\"";
        return false;
      }
      std::string inside = term.substr(open + 1, term.size() - open - 2);
      for (auto& v : split_terms(inside)) r.values.push_back(v);
    } else if (parse_equality(term, &r)) {
    } else if (term[0] == '!') {
      r.op = Requirement::Op::not_exists;
      r.key = trim(term.substr(1));
    } else {
      r.op = Requirement::Op::exists;
      r.key = term;
    }
    if (r.key.empty() || r.key.find_first_of(" \t") != std::string::npos) {
      *error = "unable to parse requirement: invalid label key in \"" + term + "\"";
      return false;
    }
    std::string problem = label_key_problem(r.key);
    for (size_t i = 0; problem.empty() && i < r.values.size(); ++i) problem = label_value_problem(r.values[i]);
    if (!problem.empty()) {
      *error = "unable to parse requirement: " + problem;
      return false;
    }
    out->requirements.push_back(std::move(r));
  }
  return true;
}

bool LabelSelector::matches(const nlohmann::json& labels) const {
  for (const auto& r : requirements) {
    bool has = labels.is_object() && labels.contains(r.key) && labels[r.key].is_string();
    std::string v = has ? labels[r.key].get<std::string>() : "";
    bool in_values = has && std::find(r.values.begin(), r.values.end(), v) != r.values.end();
    switch (r.op) {
      case Requirement::Op::equals:
      case Requirement::Op::in:
        if (!in_values) return false;
        break;
      case Requirement::Op::not_equals:
      case Requirement::Op::not_in:
        if (in_values) return false;
        break;
      case Requirement::Op::exists:
        if (!has) return false;
        break;
      case Requirement::Op::not_exists:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool parse_field_selector(const std::string& text, FieldSelector* out, std::string* error) {
  out->requirements.clear();
  if (trim(text).empty()) return true;
  for (const std::string& term : split_terms(text)) {
    Requirement r;
    if (!parse_equality(term, &r) || r.key.empty()) {
      *error = "invalid field selector term \"" + term + "\": expected field=value, field==value or field!=value";
      return false;
    }
    out->requirements.push_back(std::move(r));
  }
  return true;
}

bool FieldSelector::matches(const nlohmann::json& object) const {
  for (const auto& r : requirements) {
    bool present = false;
    std::string v = field_value(object, r.key, &present);
    bool eq = v == r.values[0];  // an absent field compares as ""
    if (r.op == Requirement::Op::equals && !eq) return false;
    if (r.op == Requirement::Op::not_equals && eq) return false;
  }
  return true;
}

std::vector<std::string> supported_field_selectors(const std::string& group, const std::string& plural,
                                                   const std::vector<std::string>& selectable_fields) {
  std::vector<std::string> out = {"metadata.name", "metadata.namespace"};
  std::vector<std::string> own;
  if (group.empty()) {
    // k8s.io/kubernetes pkg/registry/core/*/strategy.go (ToSelectableFields / field label conversions).
    if (plural == "pods")
      own = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"};
    else if (plural == "nodes") own = {"spec.unschedulable"};
    else if (plural == "namespaces") own = {"status.phase"};
    else if (plural == "secrets") own = {"type"};
    else if (plural == "services") own = {"spec.clusterIP", "spec.type"};
    else if (plural == "events")
      own = {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
             "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
             "reason", "reportingComponent", "source", "type"};
  }
  own.insert(own.end(), selectable_fields.begin(), selectable_fields.end());
  out.insert(out.end(), own.begin(), own.end());
  return out;
}

std::string unsupported_field_selector(const FieldSelector& selector, const std::vector<std::string>& supported) {
  for (const auto& r : selector.requirements) {
    if (std::find(supported.begin(), supported.end(), r.key) != supported.end()) continue;
    std::string list;
    for (const auto& f : supported) list += (list.empty() ? "" : ", ") + f;
    return "field label not supported: " + r.key + " (supported: " + list + ")";
  }
  return "";
}

bool label_selector_from_json(const nlohmann::json& sel, LabelSelector* out, std::string* error) {
  out->requirements.clear();
  if (sel.is_null()) return true;
  if (!sel.is_object()) {
    *error = "selector must be an object";
    return false;
  }
  if (sel.contains("matchLabels") && sel["matchLabels"].is_object())
    for (auto& [k, v] : sel["matchLabels"].items())
      out->requirements.push_back({Requirement::Op::equals, k, {v.is_string() ? v.get<std::string>() : v.dump()}});
  if (sel.contains("matchExpressions") && sel["matchExpressions"].is_array()) {
    for (const auto& e : sel["matchExpressions"]) {
      Requirement r;
      r.key = e.value("key", "");
      std::string op = e.value("operator", "");
      if (op == "In") r.op = Requirement::Op::in;
      else if (op == "NotIn") r.op = Requirement::Op::not_in;
      else if (op == "Exists") r.op = Requirement::Op::exists;
      else if (op == "DoesNotExist") r.op = Requirement::Op::not_exists;
      else {
        *error = "unknown selector operator '" + op + "'";
        return false;
      }
      if (e.contains("values") && e["values"].is_array())
        for (const auto& v : e["values"]) r.values.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      out->requirements.push_back(std::move(r));
    }
  }
  return true;
}

}  // namespace flotilla::devcluster
