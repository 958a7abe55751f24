#include "devcluster/http_api.h"

#include <algorithm>
#include <climits>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "devcluster/builtin_schema.h"
#include "devcluster/json_limits.h"
#include "devcluster/protobuf_decode.h"
#include "devcluster/selectors.h"
#include "devcluster/tables.h"

namespace flotilla::devcluster {

using kube::net::Headers;
using kube::net::HttpRequest;
using kube::net::ResponseWriter;

namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) out.push_back(part);
  return out;
}

void send_json(ResponseWriter& w, int code, const Json& body, Headers extra = {}) {
  w.respond(code, body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json", std::move(extra));
}

void send_error(ResponseWriter& w, const ApiError& e) { send_json(w, e.code, status_json(e)); }

bool wants_table(const HttpRequest& req) { return req.headers.get("Accept").find("as=Table") != std::string::npos; }

std::string to_hex(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

bool from_hex(const std::string& s, std::string* out) {
  if (s.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int v = 0;
    for (int k = 0; k < 2; ++k) {
      char c = s[i + k];
      v = v * 16 + (c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1000);
    }
    if (v < 0) return false;
    *out += static_cast<char>(v);
  }
  return true;
}

Json resource_list(const Registry& reg, const std::string& group, const std::string& version) {
  Json resources = Json::array();
  for (const auto& t : reg.types()) {
    if (t.group != group || t.version != version) continue;
    Json verbs = t.create_only ? Json::array({"create"})
                               : Json::array({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"});
    Json r = {{"name", t.plural}, {"singularName", t.singular}, {"namespaced", t.namespaced}, {"kind", t.kind},
              {"verbs", verbs}, {"storageVersionHash", ""}};
    if (!t.short_names.empty()) r["shortNames"] = t.short_names;
    if (!t.categories.empty()) r["categories"] = t.categories;
    resources.push_back(r);
    for (const auto& sub : t.subresources) {
      Json sr = {{"name", t.plural + "/" + sub}, {"singularName", ""}, {"namespaced", t.namespaced}, {"kind", t.kind},
                 {"verbs", sub == "binding" || sub == "token" ? Json::array({"create"}) : sub == "log" ? Json::array({"get"})
                                                                                     : Json::array({"get", "patch", "update"})}};
      if (sub == "binding") sr["kind"] = "Binding";
      if (sub == "token") sr["kind"] = "TokenRequest", sr["group"] = "authentication.k8s.io", sr["version"] = "v1";
      if (sub == "scale") sr["kind"] = "Scale", sr["group"] = "autoscaling", sr["version"] = "v1";
      resources.push_back(sr);
    }
  }
  return {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", group.empty() ? version : group + "/" + version},
          {"resources", resources}};
}

Json api_group(const std::string& name, const std::vector<std::string>& versions) {
  Json vs = Json::array();
  for (const auto& v : versions) vs.push_back({{"groupVersion", name + "/" + v}, {"version", v}});
  return {{"kind", "APIGroup"}, {"apiVersion", "v1"}, {"name", name}, {"versions", vs}, {"preferredVersion", vs[0]}};
}

// The GVK's OpenAPI definition name: "io.flotilla.v1alpha1.TrainingJob", "io.k8s.api.core.v1.Pod".
std::string definition_name(const ResourceType& t) {
  if (t.is_crd) {
    std::string reversed;
    std::stringstream ss(t.group);
    std::vector<std::string> parts;
    std::string p;
    while (std::getline(ss, p, '.')) parts.push_back(p);
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) reversed += (reversed.empty() ? "" : ".") + *it;
    return reversed + "." + t.version + "." + t.kind;
  }
  std::string g = t.group.empty() ? "core" : t.group.substr(0, t.group.find('.'));
  if (t.group == "apiextensions.k8s.io") return "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions." + t.version + "." + t.kind;
  return "io.k8s.api." + g + "." + t.version + "." + t.kind;
}

Json definition_schema(const ResourceType& t, bool v3) {
  Json s = t.is_crd && !t.schema.is_null() ? t.schema : Json{{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  s["x-kubernetes-group-version-kind"] = Json::array({{{"group", t.group}, {"version", t.version}, {"kind", t.kind}}});
  if (t.is_crd) {
    // Describe metadata like kube-apiserver does for CRDs so clients see it as ObjectMeta.
    std::string ref = v3 ? "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
                         : "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    s["properties"]["metadata"] = {{"allOf", Json::array({{{"$ref", ref}}})}};
    s["properties"]["apiVersion"] = {{"type", "string"}};
    s["properties"]["kind"] = {{"type", "string"}};
  }
  return s;
}

Json openapi_paths(const ResourceType& t, bool v3) {
  std::string base = t.group.empty() ? "/api/" + t.version : "/apis/" + t.group + "/" + t.version;
  std::string coll = t.namespaced ? base + "/namespaces/{namespace}/" + t.plural : base + "/" + t.plural;
  std::string item = coll + "/{name}";
  Json gvk = {{"group", t.group}, {"version", t.version}, {"kind", t.kind}};
  Json params = Json::array({{{"name", "dryRun"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                             {{"name", "fieldManager"}, {"in", "query"}, {"schema", {{"type", "string"}}}},
                             {{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}}});
  if (!v3)
    for (auto& p : params) {
      p.erase("schema");
      p["type"] = "string";
    }
  std::string ref = v3 ? "#/components/schemas/" + definition_name(t) : "#/definitions/" + definition_name(t);
  auto op = [&](const std::string& action, const std::string& id, bool with_params, bool patch) {
    Json o = {{"operationId", id + t.kind}, {"x-kubernetes-action", action}, {"x-kubernetes-group-version-kind", gvk},
              {"responses", {{"200", {{"description", "OK"}}}}}};
    if (with_params) o["parameters"] = params;
    if (v3 && with_params) {
      Json content = Json::object();
      if (patch) {
        for (const char* ct : {"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"})
          content[ct] = {{"schema", {{"type", "object"}}}};
        // Strategic merge is accepted for built-in types, but not advertised here: our built-in
        // schemas are opaque, and kubectl would then fail to compute patches from them instead
        // of falling back to its compiled-in type information.
      } else {
        content["application/json"] = {{"schema", {{"$ref", ref}}}};
      }
      o["requestBody"] = {{"content", content}, {"required", true}};
    }
    if (!v3 && patch) {
      Json consumes = Json::array({"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"});
      if (!t.is_crd) consumes.push_back("application/strategic-merge-patch+json");
      o["consumes"] = consumes;
    }
    return o;
  };
  Json paths = Json::object();
  paths[coll] = {{"get", op("list", "list", false, false)}, {"post", op("post", "create", true, false)}};
  paths[item] = {{"get", op("get", "read", false, false)},
                 {"put", op("put", "replace", true, false)},
                 {"patch", op("patch", "patch", true, true)},
                 {"delete", op("delete", "delete", false, false)}};
  if (t.has_status)
    paths[item + "/status"] = {{"get", op("get", "readStatus", false, false)},
                               {"put", op("put", "replaceStatus", true, false)},
                               {"patch", op("patch", "patchStatus", true, true)}};
  return paths;
}

Json object_meta_schema() {
  return {{"type", "object"},
          {"properties",
           {{"name", {{"type", "string"}}},
            {"generateName", {{"type", "string"}}},
            {"namespace", {{"type", "string"}}},
            {"uid", {{"type", "string"}}},
            {"resourceVersion", {{"type", "string"}}},
            {"generation", {{"type", "integer"}, {"format", "int64"}}},
            {"creationTimestamp", {{"type", "string"}, {"format", "date-time"}}},
            {"deletionTimestamp", {{"type", "string"}, {"format", "date-time"}}},
            {"deletionGracePeriodSeconds", {{"type", "integer"}, {"format", "int64"}}},
            {"labels", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
            {"annotations", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
            {"finalizers", {{"type", "array"}, {"items", {{"type", "string"}}}}},
            {"ownerReferences", {{"type", "array"}, {"items", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}},
            {"managedFields", {{"type", "array"}, {"items", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}};
}

std::string gv_path(const ResourceType& t) { return t.group.empty() ? "api/" + t.version : "apis/" + t.group + "/" + t.version; }

// Both selectors of a list or watch; answers 400 and returns false when one is malformed or
// selects on a field kube-apiserver would refuse for this resource.
bool parse_selectors(const ResourceType& type, const HttpRequest& req, LabelSelector* labels, FieldSelector* fields,
                     ResponseWriter& w) {
  std::string error;
  if (parse_label_selector(req.query_param("labelSelector"), labels, &error) &&
      parse_field_selector(req.query_param("fieldSelector"), fields, &error)) {
    error = unsupported_field_selector(*fields, supported_field_selectors(type.group, type.plural, type.selectable_fields));
    if (error.empty()) return true;
  }
  send_error(w, bad_request(error));
  return false;
}

// What kube-apiserver answers for a resourceVersion newer than anything it has seen (here: one
// from before the data dir was wiped). Clients re-list on it, as they do on 410.
ApiError too_large_resource_version(uint64_t asked, uint64_t current) {
  return {504, "Timeout", "Too large resource version: " + std::to_string(asked) + ", current: " + std::to_string(current),
          "", "", "", {{"", "ResourceVersionTooLarge", "Too large resource version"}}};
}

// An integer query parameter (absent: *out unchanged). False, with a 400 sent, when it is not
// an integer or, with non_negative, below zero.
bool integer_param(const HttpRequest& req, const char* key, long long* out, bool non_negative, ResponseWriter& w) {
  std::string text = req.query_param(key);
  if (text.empty()) return true;
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == text.size() && (!non_negative || value >= 0)) {
    *out = value;
    return true;
  }
  send_error(w, bad_request(std::string(key) + " must be " + (non_negative ? "a non-negative" : "an") + " integer, got \"" +
                            text + "\""));
  return false;
}

// resourceVersion as a number; "" and "0" are 0. False (and a 400 sent) when it is not one.
bool parse_resource_version(const std::string& text, uint64_t* out, ResponseWriter& w) {
  *out = 0;
  if (text.empty()) return true;
  size_t used = 0;
  try {
    if (text[0] != '-' && text[0] != '+') *out = std::stoull(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == text.size()) return true;
  send_error(w, bad_request("resourceVersion must be a non-negative integer, got \"" + text + "\""));
  return false;
}

// kube-apiserver's ValidateListOptions: resourceVersionMatch and sendInitialEvents combinations
// it refuses, as 422 Invalid on ListOptions.meta.k8s.io (sent; false returned) .
bool check_list_options(const HttpRequest& req, bool is_watch, ResponseWriter& w) {
  const std::string match = req.query_param("resourceVersionMatch"), rv = req.query_param("resourceVersion");
  const bool send_initial = !req.query_param("sendInitialEvents").empty();
  std::vector<Cause> causes;
  auto forbid = [&](const std::string& field, const std::string& why) {
    causes.push_back({field, "FieldValueForbidden", "Forbidden: " + why});
  };
  if (!match.empty() && match != "NotOlderThan" && (is_watch || match != "Exact"))
    causes.push_back({"resourceVersionMatch", "FieldValueNotSupported",
                      "Unsupported value: \"" + match + "\": supported values: " +
                          (is_watch ? "\"NotOlderThan\"" : "\"Exact\", \"NotOlderThan\"")});
  if (is_watch) {
    if (send_initial && match != "NotOlderThan")
      forbid("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
    if (send_initial && req.query_param("allowWatchBookmarks") != "true")
      forbid("allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true");
    if (!match.empty() && !send_initial)
      forbid("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
  } else {
    if (!match.empty() && rv.empty())
      forbid("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided");
    if (match == "Exact" && rv == "0")
      forbid("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    if (!match.empty() && !req.query_param("continue").empty())
      forbid("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided");
  }
  if (causes.empty()) return true;
  send_error(w, invalid("meta.k8s.io", "ListOptions", "", std::move(causes)));
  return false;
}

// The object as served at `api_version` (CRDs share one storage across versions).
Json as_version(const Json& obj, const ResourceType& t) {
  if (obj.value("apiVersion", "") == t.api_version()) return obj;
  Json copy = obj;
  copy["apiVersion"] = t.api_version();
  return copy;
}

}  // namespace

void HttpApi::respond_outcome(ResponseWriter& w, const Outcome& o, const std::string&) {
  if (!o.ok()) return send_error(w, *o.error);
  Headers h;
  for (const auto& warning : o.warnings) h.add("Warning", "299 - " + Json(warning).dump());
  send_json(w, o.code, o.object, std::move(h));
}

void HttpApi::discovery(const HttpRequest& req, const std::vector<std::string>& seg, ResponseWriter& w, bool* handled) {
  *handled = true;
  auto reg = api_.registry();
  if (seg.size() == 1 && seg[0] == "api") {
    return send_json(w, 200, {{"kind", "APIVersions"}, {"versions", {"v1"}},
                              {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", options_.server_address.empty() ? req.headers.get("Host") : options_.server_address}}}}});
  }
  if (seg.size() == 2 && seg[0] == "api" && seg[1] == "v1") return send_json(w, 200, resource_list(*reg, "", "v1"));
  if (seg.size() == 1 && seg[0] == "apis") {
    Json groups = Json::array();
    for (const auto& [g, versions] : reg->groups()) groups.push_back(api_group(g, versions));
    return send_json(w, 200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}});
  }
  if (seg.size() == 2 && seg[0] == "apis") {
    for (const auto& [g, versions] : reg->groups())
      if (g == seg[1]) return send_json(w, 200, api_group(g, versions));
    return send_error(w, {404, "NotFound", "the server could not find the requested resource", "", "", "", {}});
  }
  if (seg.size() == 3 && seg[0] == "apis") {
    Json list = resource_list(*reg, seg[1], seg[2]);
    if (list["resources"].empty())
      return send_error(w, {404, "NotFound", "the server could not find the requested resource", "", "", "", {}});
    return send_json(w, 200, list);
  }
  *handled = false;
}

void HttpApi::openapi(const HttpRequest& req, const std::vector<std::string>& seg, ResponseWriter& w) {
  auto reg = api_.registry();
  std::string hash = std::to_string(reg->generation());
  if (seg[1] == "v2") {
    if (req.headers.get("Accept").find("protobuf") != std::string::npos &&
        req.headers.get("Accept").find("json") == std::string::npos)
      return send_error(w, {406, "NotAcceptable", "devcluster serves OpenAPI v2 as JSON only", "", "", "", {}});
    Json doc = {{"swagger", "2.0"}, {"info", {{"title", "Kubernetes (flotilla devcluster)"}, {"version", "v1.32.0"}}}};
    Json paths = Json::object(), defs = Json::object();
    for (const auto& t : reg->types()) {
      if (t.create_only) continue;
      Json type_paths = openapi_paths(t, false);
      for (auto& [p, v] : type_paths.items()) paths[p] = v;
      defs[definition_name(t)] = definition_schema(t, false);
    }
    defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] = object_meta_schema();
    doc["paths"] = paths;
    doc["definitions"] = defs;
    return send_json(w, 200, doc);
  }
  // v3
  if (seg.size() == 2) {
    Json paths = Json::object();
    std::vector<std::string> gvs = {"api/v1"};
    for (const auto& t : reg->types())
      if (!t.create_only && std::find(gvs.begin(), gvs.end(), gv_path(t)) == gvs.end()) gvs.push_back(gv_path(t));
    for (const auto& gv : gvs) paths[gv] = {{"serverRelativeURL", "/openapi/v3/" + gv + "?hash=" + hash}};
    return send_json(w, 200, {{"paths", paths}});
  }
  std::string gv;
  for (size_t i = 2; i < seg.size(); ++i) gv += (gv.empty() ? "" : "/") + seg[i];
  Json paths = Json::object(), schemas = Json::object();
  bool any = false;
  for (const auto& t : reg->types()) {
    if (t.create_only || gv_path(t) != gv) continue;
    any = true;
    Json type_paths = openapi_paths(t, true);
    for (auto& [p, v] : type_paths.items()) paths[p] = v;
    schemas[definition_name(t)] = definition_schema(t, true);
  }
  if (!any) return send_error(w, {404, "NotFound", "no OpenAPI document for " + gv, "", "", "", {}});
  schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] = object_meta_schema();
  Json doc = {{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes (flotilla devcluster)"}, {"version", "v1.32.0"}}},
              {"paths", paths},
              {"components", {{"schemas", schemas}}}};
  Headers h;
  h.set("Cache-Control", "public, immutable");
  h.set("Etag", "\"" + hash + "\"");
  send_json(w, 200, doc, std::move(h));
}

void HttpApi::list(const ResourceType& type, const std::string& ns, const HttpRequest& req, ResponseWriter& w) {
  LabelSelector labels;
  FieldSelector fields;
  if (!parse_selectors(type, req, &labels, &fields, w)) return;
  long long limit = 0;
  if (!integer_param(req, "limit", &limit, false, w)) return;
  // resourceVersion: ""/"0" = latest (devcluster has no staler cache to serve "any" from);
  // N (NotOlderThan) = latest once it is at least N; Exact only at the latest version, because
  // devcluster keeps no snapshots of older ones.
  uint64_t want_rv = 0;
  std::string rv_text = req.query_param("resourceVersion"), match = req.query_param("resourceVersionMatch");
  if (!check_list_options(req, false, w) || !parse_resource_version(rv_text, &want_rv, w)) return;
  std::string after;
  std::string token = req.query_param("continue");
  if (!token.empty() && !rv_text.empty() && rv_text != "0")
    return send_error(w, bad_request("specifying resource version is not allowed when using continue"));
  if (!token.empty() && !from_hex(token, &after))
    return send_error(w, {410, "Expired", "the provided continue parameter is too old or malformed", "", "", "", {}});
  std::vector<ObjectPtr> items;
  std::string next_token;
  long long remaining = 0;
  uint64_t rv;
  {
    auto lock = api_.store().lock();
    rv = api_.store().rv_locked();
    if (want_rv > rv) return send_error(w, too_large_resource_version(want_rv, rv));
    if (match == "Exact" && want_rv != rv)
      return send_error(w, {410, "Expired", "devcluster lists only at the latest resourceVersion (" + std::to_string(rv) +
                                                "); resourceVersion " + rv_text + " with resourceVersionMatch=Exact is not kept",
                            "", "", "", {}});
    auto all = api_.store().list_locked(type.storage_key(), type.namespaced ? ns : "", after);
    std::string last_key;
    for (const auto& [key, obj] : all) {
      if (!labels.matches((*obj)["metadata"].value("labels", Json::object()))) continue;
      if (!fields.empty() && !fields.matches(*obj)) continue;
      if (limit > 0 && static_cast<long long>(items.size()) >= limit) {
        ++remaining;
        continue;
      }
      items.push_back(obj);
      last_key = key;
    }
    if (remaining > 0) next_token = to_hex(last_key);
  }
  if (wants_table(req)) {
    std::vector<const Json*> ptrs;
    for (const auto& o : items) ptrs.push_back(o.get());
    return send_json(w, 200, make_table(type, ptrs, std::to_string(rv), next_token, req.query_param("includeObject", "Metadata")));
  }
  // Build the body by concatenation: items are already JSON and may be many.
  Json meta = {{"resourceVersion", std::to_string(rv)}};
  if (!next_token.empty()) {
    meta["continue"] = next_token;
    meta["remainingItemCount"] = remaining;
  }
  std::string body = "{\"kind\":\"" + type.kind + "List\",\"apiVersion\":\"" + type.api_version() + "\",\"metadata\":" +
                     meta.dump() + ",\"items\":[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) body += ',';
    const Json& obj = *items[i];
    body += obj.value("apiVersion", "") == type.api_version() ? obj.dump() : as_version(obj, type).dump();
  }
  body += "]}";
  w.respond(200, std::move(body), "application/json");
}

void HttpApi::watch(const ResourceType& type, const std::string& ns, const HttpRequest& req, ResponseWriter& w,
                    const std::string& only_name) {
  LabelSelector labels;
  FieldSelector fields;
  if (!parse_selectors(type, req, &labels, &fields, w)) return;
  std::string rv_text = req.query_param("resourceVersion");
  uint64_t since = 0;
  if (!check_list_options(req, true, w) || !parse_resource_version(rv_text, &since, w)) return;
  bool bookmarks = req.query_param("allowWatchBookmarks") == "true";
  bool initial_events = req.query_param("sendInitialEvents") == "true";
  bool table = wants_table(req);
  std::string include_object = req.query_param("includeObject", "Metadata");
  long long timeout_seconds = 0;
  if (!integer_param(req, "timeoutSeconds", &timeout_seconds, true, w)) return;
  auto deadline = timeout_seconds > 0 ? std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds)
                                      : std::chrono::steady_clock::time_point::max();
  const std::string storage = type.storage_key();
  const std::string scope_ns = type.namespaced ? ns : "";
  bool first_table_event = true;

  auto matches = [&](const Json& obj) {
    if (!scope_ns.empty() && obj["metadata"].value("namespace", "") != scope_ns) return false;
    if (!only_name.empty() && obj["metadata"].value("name", "") != only_name) return false;
    if (!labels.matches(obj["metadata"].value("labels", Json::object()))) return false;
    return fields.empty() || fields.matches(obj);
  };
  auto encode = [&](const std::string& ev_type, const Json& obj, const std::string* prebuilt) -> std::string {
    if (table) {
      long long now = static_cast<long long>(std::time(nullptr));
      Json t = {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"},
                {"metadata", {{"resourceVersion", obj["metadata"].value("resourceVersion", "")}}},
                {"columnDefinitions", first_table_event ? table_columns(type) : Json::array()},
                {"rows", Json::array({table_row(type, obj, now, include_object)})}};
      first_table_event = false;
      return Json{{"type", ev_type}, {"object", t}}.dump() + "\n";
    }
    if (prebuilt && obj.value("apiVersion", "") == type.api_version()) return *prebuilt;
    return Json{{"type", ev_type}, {"object", as_version(obj, type)}}.dump() + "\n";
  };
  auto bookmark = [&](uint64_t rv, bool initial_end) {
    Json meta = {{"resourceVersion", std::to_string(rv)}};
    if (initial_end) meta["annotations"] = {{"k8s.io/initial-events-end", "true"}};
    return Json{{"type", "BOOKMARK"}, {"object", {{"kind", type.kind}, {"apiVersion", type.api_version()}, {"metadata", meta}}}}
               .dump() + "\n";
  };

  std::string out;
  uint64_t cursor;
  Store& store = api_.store();
  {
    auto lock = store.lock();
    if (since == 0 || initial_events) {
      for (const auto& [key, obj] : store.list_locked(storage, scope_ns))
        if (matches(*obj)) out += encode("ADDED", *obj, nullptr);
      cursor = store.rv_locked();
      if (initial_events && bookmarks) out += bookmark(cursor, true);
    } else {
      if (since > store.rv_locked()) {
        uint64_t current = store.rv_locked();
        lock.unlock();
        return send_error(w, too_large_resource_version(since, current));
      }
      if (since < store.oldest_resumable_rv_locked()) {
        lock.unlock();
        ApiError gone{410, "Expired", "too old resource version: " + rv_text + " (" +
                                          std::to_string(store.oldest_resumable_rv_locked()) + ")", "", "", "", {}};
        w.begin_stream(200, Headers());
        w.write_chunk(Json{{"type", "ERROR"}, {"object", status_json(gone)}}.dump() + "\n");
        return;
      }
      cursor = since;
    }
  }
  Headers h;
  h.set("Content-Type", "application/json");
  if (!w.begin_stream(200, std::move(h))) return;
  if (!out.empty() && !w.write_chunk(out)) return;
  auto last_sent = std::chrono::steady_clock::now();
  std::vector<EventPtr> events;
  while (!w.should_stop() && std::chrono::steady_clock::now() < deadline) {
    events.clear();
    bool expired = false;
    {
      auto lock = store.lock();
      store.wait_locked(lock, cursor, std::chrono::milliseconds(200));
      expired = !store.events_since_locked(cursor, &events);
      if (!expired && events.empty()) cursor = std::max(cursor, store.rv_locked());
    }
    if (expired) {
      ApiError gone{410, "Expired", "too old resource version: " + std::to_string(cursor), "", "", "", {}};
      w.write_chunk(Json{{"type", "ERROR"}, {"object", status_json(gone)}}.dump() + "\n");
      return;
    }
    out.clear();
    for (const auto& ev : events) {
      cursor = ev->rv;
      if (ev->resource != storage) continue;
      bool now_in = matches(*ev->object);
      if (ev->type == "MODIFIED" && ev->previous) {
        // As kube-apiserver does: entering the selection is ADDED, leaving it is DELETED.
        bool was_in = matches(*ev->previous);
        if (now_in && !was_in) out += encode("ADDED", *ev->object, nullptr);
        else if (!now_in && was_in) out += encode("DELETED", *ev->object, nullptr);
        else if (now_in) out += encode(ev->type, *ev->object, &ev->line);
        continue;
      }
      if (now_in) out += encode(ev->type, *ev->object, &ev->line);
    }
    auto now = std::chrono::steady_clock::now();
    if (!out.empty()) {
      if (!w.write_chunk(out)) return;
      last_sent = now;
    } else if (bookmarks && now - last_sent >= options_.bookmark_interval) {
      if (!w.write_chunk(bookmark(cursor, false))) return;
      last_sent = now;
    }
  }
}

void HttpApi::serve_log(const std::string& ns, const std::string& name, const HttpRequest& req, ResponseWriter& w) {
  auto reg = api_.registry();  // keeps `pods` alive while following, if CRDs change meanwhile
  const ResourceType* pods = reg->find("", "v1", "pods");
  Outcome pod = api_.get(*pods, ns, name);
  if (!pod.ok()) return send_error(w, *pod.error);
  long long tail_lines = -1, limit_bytes = -1;
  if (!integer_param(req, "tailLines", &tail_lines, false, w) || !integer_param(req, "limitBytes", &limit_bytes, false, w))
    return;
  // Options devcluster cannot honour are refused, not ignored: ignoring them prints more (or
  // other) output than was asked for, which reads as the answer.
  if (!req.query_param("sinceSeconds").empty() || !req.query_param("sinceTime").empty())
    return send_error(w, bad_request("devcluster does not record when log lines were written, so --since/--since-time "
                                     "are not supported; use --tail=N"));
  if (req.query_param("timestamps") == "true")
    return send_error(w, bad_request("devcluster does not record when log lines were written, so --timestamps is not supported"));
  if (req.query_param("previous") == "true")
    return send_error(w, bad_request("devcluster keeps one log per container with every restart appended, so there is no "
                                     "separate previous log: `kubectl logs` without --previous shows all of it"));
  std::string container = req.query_param("container");
  if (container.empty()) container = pod.object.value("/spec/containers/0/name"_json_pointer, std::string());
  std::string path = pod_log_path ? pod_log_path(ns, name, container) : "";
  std::ifstream in(path, std::ios::binary);
  if (path.empty() || !in)
    return send_error(w, bad_request("container \"" + container + "\" in pod \"" + name + "\" has no log yet"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const size_t read_to = text.size();
  if (tail_lines == 0) text.clear();
  if (tail_lines > 0) {
    // Keep the text after the tail_lines-th newline from the end (a final newline ends the
    // last line rather than starting an empty one).
    size_t cut = text.size();
    if (cut && text[cut - 1] == '\n') --cut;
    for (long long n = 0; n < tail_lines && cut != std::string::npos; ++n)
      cut = cut == 0 ? std::string::npos : text.rfind('\n', cut - 1);
    if (cut != std::string::npos) text = text.substr(cut + 1);
  }
  size_t budget = limit_bytes > 0 ? static_cast<size_t>(limit_bytes) : std::string::npos;
  auto within_budget = [&](std::string& chunk) {
    if (chunk.size() > budget) chunk.resize(budget);
    budget -= budget == std::string::npos ? 0 : chunk.size();
  };
  within_budget(text);
  if (req.query_param("follow") != "true") return void(w.respond(200, text, "text/plain"));

  // follow: what is there, then whatever the container appends, until the pod is finished or
  // gone (one last read then), the byte budget is spent, or the client leaves.
  Headers h;
  h.set("Content-Type", "text/plain");
  if (!w.begin_stream(200, std::move(h)) || (!text.empty() && !w.write_chunk(text))) return;
  std::streamoff offset = static_cast<std::streamoff>(read_to);
  bool last_read = false;
  while (!w.should_stop() && budget > 0) {
    std::ifstream more(path, std::ios::binary);
    std::string chunk;
    if (more && more.seekg(offset)) {
      std::stringstream buf;
      buf << more.rdbuf();
      chunk = buf.str();
    }
    offset += static_cast<std::streamoff>(chunk.size());
    within_budget(chunk);
    if (!chunk.empty() && !w.write_chunk(chunk)) return;
    if (last_read) return;
    if (chunk.empty()) {
      Outcome now = api_.get(*pods, ns, name);
      std::string phase = now.ok() ? now.object.value("/status/phase"_json_pointer, std::string()) : "";
      last_read = !now.ok() || phase == "Succeeded" || phase == "Failed" ||
                  now.object.value("/metadata/uid"_json_pointer, std::string()) !=
                      pod.object.value("/metadata/uid"_json_pointer, std::string());
      if (!last_read) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

namespace {

// The request a review asks about, from spec.resourceAttributes / spec.nonResourceAttributes.
RequestAttributes review_attributes(const Json& spec) {
  RequestAttributes a;
  if (spec.contains("resourceAttributes") && spec["resourceAttributes"].is_object()) {
    const Json& r = spec["resourceAttributes"];
    a.resource_request = true;
    a.verb = r.value("verb", "");
    a.api_group = r.value("group", "");
    a.api_version = r.value("version", "");
    a.resource = r.value("resource", "");
    a.subresource = r.value("subresource", "");
    a.name = r.value("name", "");
    a.ns = r.value("namespace", "");
  } else {
    const Json r = spec.value("nonResourceAttributes", Json::object());
    a.verb = r.value("verb", "");
    a.path = r.value("path", "");
  }
  return a;
}

bool has_group(const UserInfo& user, const std::string& group) {
  return std::find(user.groups.begin(), user.groups.end(), group) != user.groups.end();
}

}  // namespace

void HttpApi::answer_review(const ResourceType& type, const HttpRequest& req, ResponseWriter& w, const UserInfo& user) {
  if (type.kind == "SelfSubjectReview")  // the question is always "who am I"
    return send_json(w, 201, {{"kind", type.kind}, {"apiVersion", type.api_version()},
                              {"metadata", {{"creationTimestamp", nullptr}}},
                              {"status", {{"userInfo", {{"username", user.name}, {"groups", user.groups}}}}}});
  // kubectl sends reviews as protobuf (protobuf_decode.h reads their specs), others JSON.
  Json body = Json::object();
  if (req.headers.get("Content-Type").find("protobuf") != std::string::npos) {
    std::string error;
    if (!decode_kubernetes_protobuf(req.body, &body, &error)) return send_error(w, {415, "UnsupportedMediaType", error, "", "", "", {}});
  } else {
    body = Json::parse(req.body, nullptr, false);
    if (!body.is_object()) return send_error(w, bad_request("the body of a review must be a JSON object"));
  }
  Json spec = body.value("spec", Json::object());
  if (!spec.is_object()) return send_error(w, bad_request("spec must be an object"));
  RbacObjects rbac = load_rbac_objects(api_.store());
  Json status;
  if (type.kind == "SelfSubjectRulesReview") {
    status = rules_for(rbac, user, spec.value("namespace", ""));
  } else {
    UserInfo subject = user;
    if (type.kind == "SubjectAccessReview") {
      subject = {spec.value("user", ""), spec.value("groups", std::vector<std::string>{})};
      if (subject.name.empty() && subject.groups.empty())
        return send_error(w, invalid("authorization.k8s.io", "SubjectAccessReview", "",
                                     {{"spec.user", "FieldValueInvalid", "Invalid value: \"\": at least one of user or group must be specified"}}));
    }
    RequestAttributes asked = review_attributes(spec);
    Decision d = authorize(rbac, subject, asked);
    status = {{"allowed", d.allowed}};
    if (!d.reason.empty()) status["reason"] = d.reason;
    else if (d.allowed) status["reason"] = has_group(subject, "system:masters") ? "member of system:masters" : "allowed by RBAC";
  }
  send_json(w, 201, {{"kind", type.kind}, {"apiVersion", type.api_version()}, {"metadata", {{"creationTimestamp", nullptr}}},
                     {"spec", spec}, {"status", status}});
}

void HttpApi::issue_token(const std::string& ns, const std::string& name, const HttpRequest& req, ResponseWriter& w) {
  if (!options_.service_account_tokens) return send_error(w, {404, "NotFound", "tokens are not issued here", "", "", "", {}});
  Json body = Json::object();
  if (req.headers.get("Content-Type").find("protobuf") != std::string::npos) {
    std::string error;
    if (!decode_kubernetes_protobuf(req.body, &body, &error)) return send_error(w, {415, "UnsupportedMediaType", error, "", "", "", {}});
  } else if (!req.body.empty()) {
    body = Json::parse(req.body, nullptr, false);
    if (!body.is_object()) return send_error(w, bad_request("the body of a TokenRequest must be a JSON object"));
  }
  const Json spec = body.value("spec", Json::object());
  long long seconds = spec.is_object() ? spec.value("expirationSeconds", 3600LL) : 3600LL;
  if (seconds < 600)
    return send_error(w, invalid("authentication.k8s.io", "TokenRequest", name,
                                 {{"spec.expirationSeconds", "FieldValueInvalid",
                                   "Invalid value: " + std::to_string(seconds) + ": may not specify a duration less than 10 minutes"}}));
  auto reg = api_.registry();
  Outcome sa = api_.get(*reg->find("", "v1", "serviceaccounts"), ns, name);
  if (!sa.ok()) return send_error(w, *sa.error);
  std::vector<std::string> audiences = spec.is_object() ? spec.value("audiences", std::vector<std::string>{}) : std::vector<std::string>{};
  const long long expires = static_cast<long long>(std::time(nullptr)) + seconds;
  std::string token = options_.service_account_tokens->issue(ns, name, sa.object["metadata"].value("uid", ""), expires, audiences);
  Json out_spec = {{"audiences", audiences}, {"expirationSeconds", seconds}, {"boundObjectRef", nullptr}};
  send_json(w, 201, {{"kind", "TokenRequest"}, {"apiVersion", "authentication.k8s.io/v1"},
                     {"metadata", {{"name", name}, {"namespace", ns}, {"creationTimestamp", now_rfc3339()}}},
                     {"spec", out_spec}, {"status", {{"token", token}, {"expirationTimestamp", rfc3339(expires)}}}});
}

namespace {

// autoscaling/v1 Scale of a Deployment.
Json scale_of(const Json& d) {
  const Json& meta = d["metadata"];
  std::string selector;
  const Json match_labels = d.value("/spec/selector/matchLabels"_json_pointer, Json::object());
  for (const auto& [k, v] : match_labels.items())
    selector += (selector.empty() ? "" : ",") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return {{"kind", "Scale"}, {"apiVersion", "autoscaling/v1"},
          {"metadata", {{"name", meta.value("name", "")}, {"namespace", meta.value("namespace", "")}, {"uid", meta.value("uid", "")},
                        {"resourceVersion", meta.value("resourceVersion", "")},
                        {"creationTimestamp", meta.value("creationTimestamp", "")}}},
          {"spec", {{"replicas", d.value("/spec/replicas"_json_pointer, 1)}}},
          {"status", {{"replicas", d.value("/status/replicas"_json_pointer, 0)}, {"selector", selector}}}};
}

}  // namespace

void HttpApi::serve_scale(const ResourceType& type, const std::string& ns, const std::string& name, const HttpRequest& req,
                          ResponseWriter& w) {
  Outcome current = api_.get(type, ns, name);
  if (!current.ok()) return send_error(w, *current.error);
  Json scale = scale_of(current.object);
  if (req.method == "GET") return send_json(w, 200, scale);
  if (req.method != "PUT" && req.method != "PATCH")
    return send_error(w, {405, "MethodNotAllowed", "scale accepts GET, PUT and PATCH", "", "", "", {}});
  Json wanted;
  try {
    Json body = Json::parse(req.body);
    const std::string ct = req.headers.get("Content-Type");
    if (req.method == "PUT") wanted = body;
    else if (ct.find("json-patch") != std::string::npos) wanted = scale.patch(body);
    else (wanted = scale).merge_patch(body);
  } catch (const std::exception& e) {
    return send_error(w, bad_request(std::string("the scale patch could not be applied: ") + e.what()));
  }
  const Json replicas = wanted.value("/spec/replicas"_json_pointer, Json());
  if (!replicas.is_number_integer() || replicas.get<long long>() < 0 || replicas.get<long long>() > INT32_MAX)
    return send_error(w, invalid("autoscaling", "Scale", name,
                                 {{"spec.replicas", "FieldValueInvalid", "Invalid value: " + replicas.dump() +
                                                                             ": must be greater than or equal to 0"}}));
  const std::string want_rv = wanted.value("/metadata/resourceVersion"_json_pointer, std::string());
  Outcome o = api_.mutate(type, ns, name, [&](Json& d) {
    if (!want_rv.empty() && want_rv != d["metadata"].value("resourceVersion", "")) return false;
    d["spec"]["replicas"] = replicas;
    return true;
  }, false);
  if (!o.ok()) return send_error(w, *o.error);
  if (!want_rv.empty() && want_rv != scale["metadata"]["resourceVersion"])
    return send_error(w, conflict(type.group, type.plural, name,
                                  "the object has been modified; please apply your changes to the latest version and try again"));
  send_json(w, 200, scale_of(o.object));
}

std::optional<UserInfo> HttpApi::authenticate(const HttpRequest& req, ResponseWriter& w) {
  const std::string auth = req.headers.get("Authorization");
  std::optional<UserInfo> user;
  if ((!options_.token.empty() && auth == "Bearer " + options_.token) || !w.peer_common_name().empty())
    user = UserInfo{w.peer_common_name().empty() ? "devcluster-admin" : w.peer_common_name(),
                    {"system:masters", "system:authenticated"}};
  else if (auth.rfind("Bearer ", 0) == 0 && options_.service_account_tokens)
    user = options_.service_account_tokens->authenticate(api_.store(), auth.substr(7));
  if (!user) {
    send_error(w, {401, "Unauthorized", "Unauthorized", "", "", "", {}});
    return std::nullopt;
  }
  // Impersonation (kubectl --as / --as-group): the impersonator needs the `impersonate` verb on
  // users, groups or serviceaccounts; the admin has it.
  std::string as_user = req.headers.get("Impersonate-User");
  std::vector<std::string> as_groups;
  for (const auto& [k, v] : req.headers.items())
    if (kube::net::iequals(k, "Impersonate-Group")) as_groups.push_back(v);
  if (as_user.empty() && as_groups.empty()) return user;
  if (as_user.empty()) {
    send_error(w, bad_request("requested impersonation of groups without impersonating a user"));
    return std::nullopt;
  }
  RbacObjects rbac = has_group(*user, "system:masters") ? RbacObjects{} : load_rbac_objects(api_.store());
  auto sa = parse_service_account_user(as_user);
  std::vector<RequestAttributes> asks;
  RequestAttributes ask{true, "impersonate", "", "", sa ? "serviceaccounts" : "users", "", sa ? sa->second : as_user,
                        sa ? sa->first : "", ""};
  asks.push_back(ask);
  for (const auto& g : as_groups) asks.push_back({true, "impersonate", "", "", "groups", "", g, "", ""});
  for (const auto& a : asks) {
    Decision d = authorize(rbac, *user, a);
    if (!d.allowed) {
      send_error(w, forbidden(*user, a, d.reason));
      return std::nullopt;
    }
  }
  UserInfo as{as_user, as_groups};
  if (sa && as_groups.empty()) as = service_account_user(sa->first, sa->second);
  if (!has_group(as, "system:authenticated")) as.groups.push_back("system:authenticated");
  return as;
}

void HttpApi::handle(const HttpRequest& req, ResponseWriter& w) {
  // FLOTILLA_DEVCLUSTER_TRACE=1: one line per request, to see what a client (Helm, kubectl) asks.
  static const bool trace = std::getenv("FLOTILLA_DEVCLUSTER_TRACE") != nullptr;
  if (trace)
    std::cerr << "flotilla-devcluster: " + req.method + " " + req.target + " [" + req.headers.get("Accept") + "] [" +
                     req.headers.get("Content-Type") + "]\n" << std::flush;
  try {
    handle_inner(req, w);
  } catch (const std::exception& e) {
    // A bug must cost one request, never the server.
    if (!w.responded()) send_error(w, {500, "InternalError", std::string("internal error: ") + e.what(), "", "", "", {}});
  }
}

void HttpApi::handle_inner(const HttpRequest& req, ResponseWriter& w) {
  const std::string path = req.path();
  auto seg = split_path(path);
  if (path == "/healthz" || path == "/livez" || path == "/readyz") return void(w.respond(200, "ok", "text/plain"));
  if (path == "/version")
    return send_json(w, 200, {{"major", "1"}, {"minor", "32"}, {"gitVersion", "v1.32.0-flotilla-devcluster"},
                              {"gitCommit", "devcluster"}, {"gitTreeState", "clean"}, {"buildDate", "2026-01-01T00:00:00Z"},
                              {"goVersion", "n/a"}, {"compiler", "g++"}, {"platform", "linux/amd64"}});
  // Authentication (admin token or certificate, ServiceAccount token), impersonation, then
  // RBAC for everyone but system:masters.
  std::optional<UserInfo> user = authenticate(req, w);
  if (!user) return;
  if (!has_group(*user, "system:masters")) {
    RequestAttributes asked = request_attributes(req.method, path, [&](const std::string& k) { return req.query_param(k); });
    Decision d = authorize(load_rbac_objects(api_.store()), *user, asked);
    if (!d.allowed) return send_error(w, forbidden(*user, asked, d.reason));
  }
  // Before anything parses the body: nlohmann's copy, dump, compare and merge recurse, so a
  // body nested 60,000 levels deep overflowed the stack (kube-apiserver stops at 10,000 too).
  if (!req.body.empty() && req.headers.get("Content-Type").find("protobuf") == std::string::npos)
    if (std::string_view problem = json_depth_problem(req.body); !problem.empty())
      return send_error(w, bad_request(std::string(problem)));

  if (!seg.empty() && seg[0] == "openapi" && seg.size() >= 2 && (seg[1] == "v2" || seg[1] == "v3"))
    return openapi(req, seg, w);
  if (!seg.empty() && seg[0] == "admin") {
    if (!admin) return send_error(w, {404, "NotFound", "no admin endpoints", "", "", "", {}});
    Json body = Json::object();
    if (!req.body.empty()) {
      try {
        body = Json::parse(req.body);
      } catch (const std::exception& e) {
        return send_error(w, bad_request(std::string("malformed JSON body: ") + e.what()));
      }
    }
    return respond_outcome(w, admin(req.method, std::vector<std::string>(seg.begin() + 1, seg.end()), body), "");
  }
  if (req.method == "GET") {
    bool handled = false;
    discovery(req, seg, w, &handled);
    if (handled) return;
  }

  // Resource paths.
  std::string group, version;
  size_t rest_at;
  if (seg.size() >= 3 && seg[0] == "api" && seg[1] == "v1") {
    version = "v1";
    rest_at = 2;
  } else if (seg.size() >= 4 && seg[0] == "apis") {
    group = seg[1];
    version = seg[2];
    rest_at = 3;
  } else {
    return send_error(w, {404, "NotFound", "the server could not find the requested resource", "", "", "", {}});
  }
  std::vector<std::string> rest(seg.begin() + static_cast<long>(rest_at), seg.end());
  auto reg = api_.registry();
  std::string ns, plural, name, sub;
  const ResourceType* type = nullptr;
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    const ResourceType* t = reg->find(group, version, rest[2]);
    if (t && t->namespaced) {
      ns = rest[1];
      plural = rest[2];
      if (rest.size() >= 4) name = rest[3];
      if (rest.size() >= 5) sub = rest[4];
      if (rest.size() > 5) type = nullptr, plural.clear();
      type = rest.size() <= 5 ? t : nullptr;
    }
  }
  if (!type && plural.empty()) {
    plural = rest[0];
    if (rest.size() >= 2) name = rest[1];
    if (rest.size() >= 3) sub = rest[2];
    type = rest.size() <= 3 ? reg->find(group, version, plural) : nullptr;
  }
  if (!type)
    return send_error(w, {404, "NotFound", "the server could not find the requested resource", "", group, "", {}});
  if (!sub.empty() && std::find(type->subresources.begin(), type->subresources.end(), sub) == type->subresources.end()) {
    // Say which subresource is missing: kubectl exec/attach/port-forward/cp/debug show only this.
    std::string why = "the server could not find the requested resource: devcluster does not implement " +
                      type->plural + "/" + sub;
    if (type->plural == "pods" && sub == "ephemeralcontainers")
      why = "the server could not find the requested resource: devcluster does not support ephemeral containers "
            "(pods/ephemeralcontainers, used by `kubectl debug`): pods are local processes without images; "
            "`kubectl logs` shows their output";
    else if (type->plural == "pods")
      why += " (pods are local processes; `kubectl logs` shows their output)";
    return send_error(w, {404, "NotFound", why, "", group, "", {}});
  }
  if (type->namespaced && ns.empty() && !name.empty())
    return send_error(w, {404, "NotFound", "the server could not find the requested resource (namespace required)", "", group, "", {}});
  if (type->namespaced && !ns.empty()) {
    // A namespace path segment must exist for reads too (creates check it themselves).
  }

  if (type->create_only) {
    if (req.method != "POST" || !name.empty())
      return send_error(w, {405, "MethodNotAllowed", type->plural + " can only be created (POST)", type->plural, group, "", {}});
    return answer_review(*type, req, w, *user);
  }

  WriteOptions wopts;
  wopts.dry_run = req.query_param("dryRun") == "All";
  wopts.field_validation = req.query_param("fieldValidation");
  wopts.field_manager = req.query_param("fieldManager");
  auto parse_body = [&](Json* out) -> bool {
    std::string ct = req.headers.get("Content-Type");
    if (ct.rfind("application/vnd.kubernetes.protobuf", 0) == 0) {
      std::string perr;
      if (decode_kubernetes_protobuf(req.body, out, &perr)) {
        // Protobuf strings are bytes: refuse what JSON cannot carry (dump would throw later).
        try {
          (void)out->dump();
          return true;
        } catch (const std::exception& e) {
          send_error(w, bad_request(std::string("the body of the request is not valid UTF-8: ") + e.what()));
          return false;
        }
      }
      if (req.method == "DELETE") {  // typed clients send DeleteOptions as protobuf: use defaults
        *out = Json::object();
        return true;
      }
      send_error(w, {415, "UnsupportedMediaType", perr, "", "", "", {}});
      return false;
    }
    try {
      *out = Json::parse(req.body);
      return true;
    } catch (const std::exception& e) {
      send_error(w, bad_request(std::string("the body of the request could not be decoded as JSON: ") + e.what()));
      return false;
    }
  };

  // DeleteOptions from the body (JSON, or protobuf as typed clients send: defaults) and the query.
  auto parse_delete_options = [&](DeleteOptions* dopts) -> bool {
    Json body = Json::object();
    if (!req.body.empty() && !parse_body(&body)) return false;
    if (!body.is_object()) {
      send_error(w, bad_request("the body of a delete must be a DeleteOptions object"));
      return false;
    }
    std::vector<std::string> unknown;  // ignored, as kube-apiserver does for DeleteOptions
    if (auto e = decode_builtin("DeleteOptions", "meta.k8s.io/v1", body, &unknown)) {
      send_error(w, *e);
      return false;
    }
    if (body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number_integer())
      dopts->grace_seconds = body["gracePeriodSeconds"].get<long long>();
    std::string grace_q = req.query_param("gracePeriodSeconds");
    if (!grace_q.empty()) {
      try {
        dopts->grace_seconds = std::stoll(grace_q);
      } catch (...) {
        send_error(w, bad_request("gracePeriodSeconds must be an integer"));
        return false;
      }
    }
    dopts->propagation = body.value("propagationPolicy", req.query_param("propagationPolicy"));
    if (body.contains("preconditions")) {
      dopts->precondition_uid = body["preconditions"].value("uid", "");
      dopts->precondition_rv = body["preconditions"].value("resourceVersion", "");
    }
    dopts->dry_run = wopts.dry_run || (body.contains("dryRun") && !body["dryRun"].empty());
    return true;
  };

  if (name.empty()) {
    if (req.method == "DELETE") {
      // deletecollection: every object the selectors pick, each deleted as a DELETE would.
      DeleteOptions dopts;
      LabelSelector labels;
      FieldSelector fields;
      if (!parse_selectors(*type, req, &labels, &fields, w) || !parse_delete_options(&dopts)) return;
      std::vector<std::string> names;
      {
        auto lock = api_.store().lock();
        for (const auto& [key, obj] : api_.store().list_locked(type->storage_key(), type->namespaced ? ns : ""))
          if (labels.matches((*obj)["metadata"].value("labels", Json::object())) && (fields.empty() || fields.matches(*obj)))
            names.push_back((*obj)["metadata"].value("name", ""));
      }
      Json items = Json::array();
      for (const auto& n : names) {
        Outcome o = api_.remove(*type, ns, n, dopts);
        if (o.ok()) items.push_back(as_version(o.object, *type));
        else if (o.error->code != 404) return send_error(w, *o.error);
      }
      return send_json(w, 200, {{"kind", type->kind + "List"}, {"apiVersion", type->api_version()},
                                {"metadata", Json::object()}, {"items", items}});
    }
    if (req.method == "GET") {
      std::string watch_param = req.query_param("watch");
      if (watch_param == "true" || watch_param == "1") return watch(*type, ns, req, w);
      return list(*type, ns, req, w);
    }
    if (req.method == "POST") {
      Json body;
      if (!parse_body(&body)) return;
      return respond_outcome(w, api_.create(*type, ns, std::move(body), wopts), type->api_version());
    }
    return send_error(w, {405, "MethodNotAllowed", "the server does not allow this method on the requested resource", "", "", "", {}});
  }
  if (sub == "log") {
    if (req.method != "GET") return send_error(w, {405, "MethodNotAllowed", "log is read-only", "", "", "", {}});
    return serve_log(ns, name, req, w);
  }
  if (sub == "token") {
    if (req.method != "POST") return send_error(w, {405, "MethodNotAllowed", "token accepts POST only", "", "", "", {}});
    return issue_token(ns, name, req, w);
  }
  if (sub == "binding") {
    if (req.method != "POST") return send_error(w, {405, "MethodNotAllowed", "binding accepts POST only", "", "", "", {}});
    Json body;
    if (!parse_body(&body)) return;
    if (!body.is_object()) return send_error(w, bad_request("the body of a binding must be a Binding object"));
    std::vector<std::string> unknown;
    if (auto e = decode_builtin("Binding", "v1", body, &unknown)) return send_error(w, *e);
    return respond_outcome(w, api_.bind_pod(ns, name, body), "v1");
  }
  bool status_sub = sub == "status";
  if (sub == "scale") {
    if (type->plural != "deployments")
      return send_error(w, {404, "NotFound", "the scale subresource is not implemented by devcluster", "", "", "", {}});
    return serve_scale(*type, ns, name, req, w);
  }
  if (req.method == "GET") {
    if (!status_sub && (req.query_param("watch") == "true" || req.query_param("watch") == "1"))
      return watch(*type, ns, req, w, name);
    Outcome o = api_.get(*type, ns, name);
    if (o.ok()) o.object = as_version(o.object, *type);
    if (o.ok() && wants_table(req)) {
      std::vector<const Json*> one = {&o.object};
      return send_json(w, 200, make_table(*type, one, o.object["metadata"].value("resourceVersion", ""), "",
                                          req.query_param("includeObject", "Metadata")));
    }
    return respond_outcome(w, o, type->api_version());
  }
  if (req.method == "PUT") {
    Json body;
    if (!parse_body(&body)) return;
    Outcome o = api_.update(*type, ns, name, std::move(body), status_sub, wopts);
    if (o.ok()) o.object = as_version(o.object, *type);
    return respond_outcome(w, o, type->api_version());
  }
  if (req.method == "PATCH") {
    Outcome o = api_.patch(*type, ns, name, req.headers.get("Content-Type"), req.body, status_sub, wopts);
    if (o.ok()) o.object = as_version(o.object, *type);
    return respond_outcome(w, o, type->api_version());
  }
  if (req.method == "DELETE") {
    DeleteOptions dopts;
    if (!parse_delete_options(&dopts)) return;
    Outcome o = api_.remove(*type, ns, name, dopts);
    if (o.ok()) o.object = as_version(o.object, *type);
    return respond_outcome(w, o, type->api_version());
  }
  send_error(w, {405, "MethodNotAllowed", "the server does not allow this method on the requested resource", "", "", "", {}});
}

}  // namespace flotilla::devcluster
