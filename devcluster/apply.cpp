#include "devcluster/apply.h"

#include <yaml-cpp/yaml.h>

#include "kube/yaml_json.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

// Fields the server owns: never part of an applier's field set.
bool server_owned(const std::string& path_key, int depth) {
  if (depth == 0) return path_key == "apiVersion" || path_key == "kind" || path_key == "status";
  return false;
}

bool server_owned_metadata(const std::string& key) {
  return key == "name" || key == "namespace" || key == "uid" || key == "resourceVersion" || key == "generation" ||
         key == "creationTimestamp" || key == "deletionTimestamp" || key == "deletionGracePeriodSeconds" ||
         key == "managedFields" || key == "selfLink";
}

Json field_set(const Json& value, int depth, bool in_metadata) {
  Json set = Json::object();
  for (const auto& [k, v] : value.items()) {
    if (server_owned(k, depth) || (in_metadata && server_owned_metadata(k)) || v.is_null()) continue;
    set["f:" + k] = v.is_object() && !v.empty() ? field_set(v, depth + 1, depth == 0 && k == "metadata") : Json::object();
  }
  return set;
}

// Removes from `live` what `old_set` names and `new_set` does not.
void remove_dropped(Json& live, const Json& old_set, const Json& new_set) {
  if (!live.is_object() || !old_set.is_object()) return;
  for (const auto& [fk, sub] : old_set.items()) {
    if (fk.rfind("f:", 0) != 0) continue;
    const std::string key = fk.substr(2);
    if (!live.contains(key)) continue;
    if (!new_set.is_object() || !new_set.contains(fk)) {
      live.erase(key);
    } else if (!sub.empty() && !new_set[fk].empty()) {
      remove_dropped(live[key], sub, new_set[fk]);
    }
  }
}

void merge_into(Json& live, const Json& applied) {
  for (const auto& [k, v] : applied.items()) {
    if (v.is_null()) continue;
    if (v.is_object() && live.contains(k) && live[k].is_object()) merge_into(live[k], v);
    else live[k] = v;
  }
}

}  // namespace

bool parse_apply_body(const std::string& body, Json* out, std::string* error) {
  *out = Json::parse(body, nullptr, false);
  if (!out->is_discarded()) {
    if (out->is_object()) return true;
    *error = "an apply patch must be an object";
    return false;
  }
  try {
    *out = kube::yaml_to_json(YAML::Load(body));
  } catch (const std::exception& e) {
    *error = std::string("error decoding YAML: ") + e.what();
    return false;
  }
  if (out->is_object()) return true;
  *error = "an apply patch must be an object";
  return false;
}

Json applied_field_set(const Json& applied) { return field_set(applied, 0, false); }

Json apply_configuration(const Json& live, const Json& applied, const Json& previous_fields) {
  Json next = live;
  remove_dropped(next, previous_fields, applied_field_set(applied));
  merge_into(next, applied);
  return next;
}

Json managed_fields_of(const Json& object, const std::string& manager) {
  for (const auto& e : object.value("/metadata/managedFields"_json_pointer, Json::array()))
    if (e.value("manager", "") == manager && e.value("operation", "") == "Apply") return e.value("fieldsV1", Json());
  return Json();
}

void set_managed_fields(Json& object, const std::string& manager, const Json& fields, const std::string& api_version,
                        const std::string& now) {
  Json kept = Json::array();
  for (const auto& e : object.value("/metadata/managedFields"_json_pointer, Json::array()))
    if (!(e.value("manager", "") == manager && e.value("operation", "") == "Apply")) kept.push_back(e);
  kept.push_back({{"manager", manager}, {"operation", "Apply"}, {"apiVersion", api_version}, {"time", now},
                  {"fieldsType", "FieldsV1"}, {"fieldsV1", fields}});
  object["metadata"]["managedFields"] = kept;
}

}  // namespace flotilla::devcluster
