#include "devcluster/schema.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

bool is_root_meta(const std::string& path, const std::string& key) {
  return path.empty() && (key == "apiVersion" || key == "kind" || key == "metadata");
}

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

void defaults(const Json& schema, Json& value, const std::string& path) {
  if (!schema.is_object()) return;
  if (value.is_object() && schema.contains("properties")) {
    for (auto& [key, sub] : schema["properties"].items()) {
      if (is_root_meta(path, key)) continue;
      if (!value.contains(key) && sub.is_object() && sub.contains("default")) value[key] = sub["default"];
      if (value.contains(key)) defaults(sub, value[key], join(path, key));
    }
  }
  if (value.is_object() && schema.contains("additionalProperties") && schema["additionalProperties"].is_object())
    for (auto& [key, v] : value.items()) defaults(schema["additionalProperties"], v, join(path, key));
  if (value.is_array() && schema.contains("items"))
    for (auto& el : value) defaults(schema["items"], el, path + "[]");
}

void prune(const Json& schema, Json& value, const std::string& path, std::vector<std::string>* pruned) {
  if (!schema.is_object() || schema.value("x-kubernetes-preserve-unknown-fields", false)) {
    // Preserve this level, but still prune inside declared properties.
    if (schema.is_object() && value.is_object() && schema.contains("properties"))
      for (auto& [key, sub] : schema["properties"].items())
        if (value.contains(key)) prune(sub, value[key], join(path, key), pruned);
    return;
  }
  if (value.is_object()) {
    bool embedded = schema.value("x-kubernetes-embedded-resource", false);
    if (schema.contains("properties")) {
      const Json& props = schema["properties"];
      for (auto it = value.begin(); it != value.end();) {
        const std::string key = it.key();
        if (is_root_meta(path, key) || (embedded && (key == "apiVersion" || key == "kind" || key == "metadata"))) {
          ++it;
          continue;
        }
        if (!props.contains(key)) {
          pruned->push_back(join(path, key));
          it = value.erase(it);
          continue;
        }
        prune(props[key], *it, join(path, key), pruned);
        ++it;
      }
    } else if (schema.contains("additionalProperties")) {
      const Json& ap = schema["additionalProperties"];
      if (ap.is_object())
        for (auto& [key, v] : value.items()) prune(ap, v, join(path, key), pruned);
    } else if (schema.value("type", "") == "object" && !embedded) {
      for (auto it = value.begin(); it != value.end();) {
        if (is_root_meta(path, it.key())) {
          ++it;
          continue;
        }
        pruned->push_back(join(path, it.key()));
        it = value.erase(it);
      }
    }
  } else if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) prune(schema["items"], value[i], path + "[" + std::to_string(i) + "]", pruned);
  }
}

std::string type_of(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// CRD patterns run on RE2: linear time in the input, no backtracking, so `^(a+)+$` against
// 50,000 characters is as cheap as any other pattern (std::regex recursed until the stack
// overflowed). RE2's syntax is Go's regexp syntax, which kube-apiserver uses for `pattern`.
RE2::Options pattern_options() {
  RE2::Options o;
  o.set_log_errors(false);
  return o;
}

// Why `pattern` cannot be enforced ("" when it can).
std::string pattern_problem(const std::string& pattern) {
  RE2 re(pattern, pattern_options());
  return re.ok() ? "" : "must be a valid regular expression: " + re.error();
}

std::string shown(const Json& v) { return v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump(); }

void add(std::vector<Cause>* out, const std::string& path, const std::string& reason, const std::string& msg) {
  out->push_back({path, reason, msg});
}

void validate(const Json& schema, const Json& value, const std::string& path, std::vector<Cause>* out) {
  if (!schema.is_object()) return;
  const std::string where = path.empty() ? "body" : path;
  if (value.is_null()) {
    if (!schema.value("nullable", false) && schema.contains("type"))
      add(out, path, "FieldValueInvalid",
          "Invalid value: \"null\": " + where + " in body must be of type " + schema["type"].get<std::string>() + ": \"null\"");
    return;
  }
  if (schema.value("x-kubernetes-int-or-string", false)) {
    if (!value.is_string() && !value.is_number_integer())
      add(out, path, "FieldValueInvalid", "Invalid value: " + shown(value) + ": " + where + " in body must be of type int-or-string");
    return;
  }
  std::string want = schema.value("type", "");
  std::string have = type_of(value);
  bool type_ok = want.empty() || want == have || (want == "number" && have == "integer");
  if (!type_ok) {
    add(out, path, "FieldValueTypeInvalid",
        "Invalid value: \"" + have + "\": " + where + " in body must be of type " + want + ": \"" + have + "\"");
    return;
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found) {
      std::string supported;
      for (const auto& e : schema["enum"]) supported += (supported.empty() ? "" : ", ") + shown(e);
      add(out, path, "FieldValueNotSupported", "Unsupported value: " + shown(value) + ": supported values: " + supported);
    }
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum")) {
      double m = schema["minimum"].get<double>();
      bool excl = schema.value("exclusiveMinimum", false);
      if (excl ? v <= m : v < m)
        add(out, path, "FieldValueInvalid", "Invalid value: " + value.dump() + ": " + where + " in body should be greater than " +
                                                (excl ? "" : "or equal to ") + schema["minimum"].dump());
    }
    if (schema.contains("maximum")) {
      double m = schema["maximum"].get<double>();
      bool excl = schema.value("exclusiveMaximum", false);
      if (excl ? v >= m : v > m)
        add(out, path, "FieldValueInvalid", "Invalid value: " + value.dump() + ": " + where + " in body should be less than " +
                                                (excl ? "" : "or equal to ") + schema["maximum"].dump());
    }
    if (schema.value("format", "") == "int32" && value.is_number_integer() &&
        (value.get<long long>() > 2147483647LL || value.get<long long>() < -2147483648LL))
      add(out, path, "FieldValueInvalid", "Invalid value: " + value.dump() + ": " + where + " in body must be of type int32");
  }
  if (value.is_string()) {
    auto len = static_cast<long long>(value.get<std::string>().size());
    if (schema.contains("minLength") && len < schema["minLength"].get<long long>())
      add(out, path, "FieldValueInvalid", "Invalid value: " + shown(value) + ": " + where + " in body should be at least " +
                                              schema["minLength"].dump() + " chars long");
    if (schema.contains("maxLength") && len > schema["maxLength"].get<long long>())
      add(out, path, "FieldValueTooLong", "Too long: may not be longer than " + schema["maxLength"].dump());
    if (schema.contains("pattern") && schema["pattern"].is_string()) {
      // CRD create refuses patterns that do not compile; one stored before that is skipped.
      RE2 re(schema["pattern"].get<std::string>(), pattern_options());
      if (re.ok() && !RE2::PartialMatch(value.get<std::string>(), re))
        add(out, path, "FieldValueInvalid", "Invalid value: " + shown(value) + ": " + where + " in body should match '" +
                                                schema["pattern"].get<std::string>() + "'");
    }
  }
  if (value.is_array()) {
    auto n = static_cast<long long>(value.size());
    if (schema.contains("minItems") && n < schema["minItems"].get<long long>())
      add(out, path, "FieldValueInvalid", "Invalid value: " + std::to_string(n) + ": " + where + " in body should have at least " +
                                              schema["minItems"].dump() + " items");
    if (schema.contains("maxItems") && n > schema["maxItems"].get<long long>())
      add(out, path, "FieldValueTooMany", "Too many: " + std::to_string(n) + ": must have at most " + schema["maxItems"].dump() + " items");
    if (schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i) validate(schema["items"], value[i], path + "[" + std::to_string(i) + "]", out);
  }
  if (value.is_object()) {
    if (schema.contains("required") && schema["required"].is_array())
      for (const auto& r : schema["required"]) {
        std::string key = r.get<std::string>();
        if (!value.contains(key)) add(out, join(path, key), "FieldValueRequired", "Required value");
      }
    if (schema.contains("properties"))
      for (auto& [key, sub] : schema["properties"].items()) {
        if (is_root_meta(path, key)) continue;
        if (value.contains(key)) validate(sub, value[key], join(path, key), out);
      }
    if (schema.contains("additionalProperties") && schema["additionalProperties"].is_object())
      for (auto& [key, v] : value.items()) validate(schema["additionalProperties"], v, join(path, key), out);
  }
}

void check_definition(const Json& schema, const std::string& path, std::vector<Cause>* out) {
  if (!schema.is_object()) return;
  if (auto t = schema.find("type"); t != schema.end() && t->is_string()) {
    static const char* kTypes[] = {"array", "boolean", "integer", "number", "object", "string"};
    const std::string& type = t->get_ref<const std::string&>();
    if (!type.empty() && std::none_of(std::begin(kTypes), std::end(kTypes), [&](const char* k) { return type == k; }))
      add(out, path + ".type", "FieldValueNotSupported",
          "Unsupported value: \"" + type + "\": supported values: \"array\", \"boolean\", \"integer\", \"number\", "
          "\"object\", \"string\"");
  }
  auto ordered = [&](const char* lo, const char* hi) {
    auto l = schema.find(lo), h = schema.find(hi);
    if (l != schema.end() && h != schema.end() && l->is_number() && h->is_number() && l->get<double>() > h->get<double>())
      add(out, path + "." + lo, "FieldValueInvalid",
          "Invalid value: " + l->dump() + ": must be less than or equal to " + hi + " (" + h->dump() + ")");
  };
  ordered("minimum", "maximum");
  ordered("minLength", "maxLength");
  ordered("minItems", "maxItems");
  ordered("minProperties", "maxProperties");
  for (const char* k : {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
    if (auto v = schema.find(k); v != schema.end() && v->is_number() && v->get<double>() < 0)
      add(out, path + "." + k, "FieldValueInvalid", "Invalid value: " + v->dump() + ": must be greater than or equal to 0");
  if (auto p = schema.find("pattern"); p != schema.end() && p->is_string())
    if (std::string problem = pattern_problem(p->get_ref<const std::string&>()); !problem.empty())
      add(out, path + ".pattern", "FieldValueInvalid", "Invalid value: " + shown(*p) + ": " + problem);
  for (const char* k : {"properties", "patternProperties", "definitions"})
    if (auto m = schema.find(k); m != schema.end() && m->is_object())
      for (const auto& [name, sub] : m->items()) check_definition(sub, path + "." + k + "[" + name + "]", out);
  for (const char* k : {"items", "additionalProperties", "additionalItems", "not"})
    if (auto sub = schema.find(k); sub != schema.end()) {
      if (sub->is_object()) check_definition(*sub, path + "." + k, out);
      else if (sub->is_array())
        for (size_t i = 0; i < sub->size(); ++i) check_definition((*sub)[i], path + "." + k + "[" + std::to_string(i) + "]", out);
    }
  for (const char* k : {"allOf", "anyOf", "oneOf"})
    if (auto list = schema.find(k); list != schema.end() && list->is_array())
      for (size_t i = 0; i < list->size(); ++i) check_definition((*list)[i], path + "." + k + "[" + std::to_string(i) + "]", out);
}

}  // namespace

std::vector<Cause> validate_schema_definition(const Json& schema, const std::string& path) {
  std::vector<Cause> out;
  check_definition(schema, path, &out);
  return out;
}

void apply_schema_defaults(const Json& schema, Json& object) { defaults(schema, object, ""); }

void prune_unknown_fields(const Json& schema, Json& object, std::vector<std::string>* pruned) {
  prune(schema, object, "", pruned);
}

std::vector<Cause> validate_against_schema(const Json& schema, const Json& object) {
  std::vector<Cause> out;
  validate(schema, object, "", &out);
  return out;
}

}  // namespace flotilla::devcluster
