#include "devcluster/rbac.h"

#include <algorithm>
#include <sstream>

#include "devcluster/store.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, sep))
    if (!part.empty()) out.push_back(part);
  return out;
}

bool contains(const Json& list, const std::string& value) {
  if (!list.is_array()) return false;
  for (const auto& v : list)
    if (v.is_string() && v.get_ref<const std::string&>() == value) return true;
  return false;
}

// The name a fieldSelector pins with metadata.name=X (or ==), as RequiresExactMatch reads it.
std::string name_from_field_selector(const std::string& selector) {
  for (const auto& term : split(selector, ',')) {
    for (const char* op : {"==", "="}) {
      std::string prefix = std::string("metadata.name") + op;
      if (term.rfind(prefix, 0) == 0 && term.find("!=") == std::string::npos) return term.substr(prefix.size());
    }
  }
  return "";
}

bool subject_matches(const Json& subject, const UserInfo& user, const std::string& binding_ns) {
  const std::string kind = subject.value("kind", ""), name = subject.value("name", "");
  if (kind == "User") return user.name == name;
  if (kind == "Group") return std::find(user.groups.begin(), user.groups.end(), name) != user.groups.end();
  if (kind == "ServiceAccount") {
    std::string ns = subject.value("namespace", "");
    if (ns.empty()) ns = binding_ns;
    return !ns.empty() && user.name == "system:serviceaccount:" + ns + ":" + name;
  }
  return false;
}

bool binds_user(const Json& binding, const UserInfo& user, const std::string& binding_ns) {
  for (const auto& s : binding.value("subjects", Json::array()))
    if (s.is_object() && subject_matches(s, user, binding_ns)) return true;
  return false;
}

bool resource_matches(const Json& rule, const RequestAttributes& r) {
  const std::string combined = r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
  for (const auto& v : rule.value("resources", Json::array())) {
    if (!v.is_string()) continue;
    const std::string& rr = v.get_ref<const std::string&>();
    if (rr == "*" || rr == combined) return true;
    if (!r.subresource.empty() && rr == "*/" + r.subresource) return true;
  }
  return false;
}

bool url_matches(const Json& rule, const std::string& path) {
  for (const auto& v : rule.value("nonResourceURLs", Json::array())) {
    if (!v.is_string()) continue;
    const std::string& url = v.get_ref<const std::string&>();
    if (url == "*" || url == path) return true;
    if (!url.empty() && url.back() == '*' && path.rfind(url.substr(0, url.size() - 1), 0) == 0) return true;
  }
  return false;
}

bool rule_allows(const Json& rule, const RequestAttributes& r) {
  if (!rule.is_object()) return false;
  const Json verbs = rule.value("verbs", Json::array());
  if (!contains(verbs, "*") && !contains(verbs, r.verb)) return false;
  if (!r.resource_request) return url_matches(rule, r.path);
  const Json groups = rule.value("apiGroups", Json::array());
  if (!contains(groups, "*") && !contains(groups, r.api_group)) return false;
  if (!resource_matches(rule, r)) return false;
  const Json names = rule.value("resourceNames", Json::array());
  return names.empty() || (!r.name.empty() && contains(names, r.name));
}

const Json* find_named(const std::vector<Json>& objects, const std::string& ns, const std::string& name) {
  for (const auto& o : objects)
    if (o["metadata"].value("name", "") == name && o["metadata"].value("namespace", "") == ns) return &o;
  return nullptr;
}

// Calls visit(rules) for every role bound to the user that applies in `ns` (cluster bindings
// always, role bindings of `ns`); missing roles are reported to *errors.
void visit_rules(const RbacObjects& rbac, const UserInfo& user, const std::string& ns,
                 const std::function<bool(const Json& rules)>& visit, std::vector<std::string>* errors) {
  for (const auto& b : rbac.cluster_role_bindings) {
    if (!binds_user(b, user, "")) continue;
    const std::string role = b.value("/roleRef/name"_json_pointer, std::string());
    const Json* r = b.value("/roleRef/kind"_json_pointer, std::string()) == "ClusterRole" ? find_named(rbac.cluster_roles, "", role)
                                                                                         : nullptr;
    if (!r) {
      errors->push_back("clusterrole.rbac.authorization.k8s.io \"" + role + "\" not found");
      continue;
    }
    if (visit(r->value("rules", Json::array()))) return;
  }
  if (ns.empty()) return;
  for (const auto& b : rbac.role_bindings) {
    if (b["metadata"].value("namespace", "") != ns || !binds_user(b, user, ns)) continue;
    const std::string kind = b.value("/roleRef/kind"_json_pointer, std::string());
    const std::string role = b.value("/roleRef/name"_json_pointer, std::string());
    const Json* r = kind == "Role" ? find_named(rbac.roles, ns, role) : kind == "ClusterRole" ? find_named(rbac.cluster_roles, "", role)
                                                                                                : nullptr;
    if (!r) {
      errors->push_back((kind == "Role" ? "role" : "clusterrole") + std::string(".rbac.authorization.k8s.io \"") + role +
                        "\" not found");
      continue;
    }
    if (visit(r->value("rules", Json::array()))) return;
  }
}

bool is_superuser(const UserInfo& user) {
  return std::find(user.groups.begin(), user.groups.end(), "system:masters") != user.groups.end();
}

// The apiVersion, kind and metadata kube-apiserver gives the RBAC objects it bootstraps.
Json bootstrap_rbac_object(const char* kind, const std::string& name) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", kind},
          {"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/bootstrapping", "rbac-defaults"}}},
            {"annotations", {{"rbac.authorization.kubernetes.io/autoupdate", "true"}}}}}};
}

Json cluster_role(const std::string& name, Json rules) {
  Json role = bootstrap_rbac_object("ClusterRole", name);
  role["rules"] = std::move(rules);
  return role;
}

Json cluster_role_binding(const std::string& name, const std::vector<std::string>& groups) {
  Json subjects = Json::array();
  for (const auto& g : groups) subjects.push_back({{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"}, {"name", g}});
  Json binding = bootstrap_rbac_object("ClusterRoleBinding", name);
  binding["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", name}};
  binding["subjects"] = std::move(subjects);
  return binding;
}

}  // namespace

RequestAttributes request_attributes(const std::string& method, const std::string& path,
                                     const std::function<std::string(const std::string&)>& query_param) {
  RequestAttributes a;
  std::string lower = method;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  auto seg = split(path, '/');
  size_t rest_at = 0;
  if (seg.size() >= 2 && seg[0] == "api") {
    a.api_version = seg[1];
    rest_at = 2;
  } else if (seg.size() >= 3 && seg[0] == "apis") {
    a.api_group = seg[1];
    a.api_version = seg[2];
    rest_at = 3;
  }
  std::vector<std::string> parts(seg.begin() + static_cast<long>(std::min(rest_at, seg.size())), seg.end());
  if (rest_at == 0 || parts.empty()) {
    a = RequestAttributes{};
    a.verb = lower;
    a.path = path.empty() ? "/" : path;
    return a;
  }
  a.resource_request = true;
  bool legacy_watch = false;
  if (parts[0] == "watch") {
    legacy_watch = true;
    parts.erase(parts.begin());
  }
  if (parts.size() >= 2 && parts[0] == "namespaces") {
    a.ns = parts[1];
    if (parts.size() > 2 && parts[2] != "status" && parts[2] != "finalize") parts.erase(parts.begin(), parts.begin() + 2);
  }
  if (!parts.empty()) a.resource = parts[0];
  if (parts.size() >= 2) a.name = parts[1];
  if (parts.size() >= 3) a.subresource = parts[2];
  if (method == "GET" || method == "HEAD") a.verb = "get";
  else if (method == "POST") a.verb = "create";
  else if (method == "PUT") a.verb = "update";
  else if (method == "PATCH") a.verb = "patch";
  else if (method == "DELETE") a.verb = "delete";
  else a.verb = lower;
  if (legacy_watch) a.verb = "watch";
  if (a.name.empty() && a.verb == "get") {
    const std::string w = query_param("watch");
    a.verb = w == "true" || w == "1" ? "watch" : "list";
    a.name = name_from_field_selector(query_param("fieldSelector"));
  }
  if (a.name.empty() && a.verb == "delete") a.verb = "deletecollection";
  return a;
}

RbacObjects load_rbac_objects(Store& store) {
  RbacObjects out;
  auto lock = store.lock();
  auto load = [&](const char* key, std::vector<Json>* into) {
    for (const auto& [k, obj] : store.list_locked(key, "")) into->push_back(*obj);
  };
  load("rbac.authorization.k8s.io/roles", &out.roles);
  load("rbac.authorization.k8s.io/clusterroles", &out.cluster_roles);
  load("rbac.authorization.k8s.io/rolebindings", &out.role_bindings);
  load("rbac.authorization.k8s.io/clusterrolebindings", &out.cluster_role_bindings);
  return out;
}

Decision authorize(const RbacObjects& rbac, const UserInfo& user, const RequestAttributes& request) {
  if (is_superuser(user)) return {true, ""};
  bool allowed = false;
  std::vector<std::string> errors;
  visit_rules(
      rbac, user, request.resource_request ? request.ns : "",
      [&](const Json& rules) {
        for (const auto& rule : rules)
          if (rule_allows(rule, request)) return allowed = true;
        return false;
      },
      &errors);
  if (allowed) return {true, ""};
  Decision d;
  if (errors.size() == 1) d.reason = "RBAC: " + errors[0];
  if (errors.size() > 1) {
    d.reason = "RBAC: [";
    for (size_t i = 0; i < errors.size(); ++i) d.reason += (i ? ", " : "") + errors[i];
    d.reason += "]";
  }
  return d;
}

Json rules_for(const RbacObjects& rbac, const UserInfo& user, const std::string& ns) {
  Json resource_rules = Json::array(), non_resource_rules = Json::array();
  if (is_superuser(user)) {
    resource_rules.push_back({{"verbs", {"*"}}, {"apiGroups", {"*"}}, {"resources", {"*"}}});
    non_resource_rules.push_back({{"verbs", {"*"}}, {"nonResourceURLs", {"*"}}});
  }
  std::vector<std::string> errors;
  visit_rules(
      rbac, user, ns,
      [&](const Json& rules) {
        for (const auto& rule : rules) {
          if (!rule.is_object()) continue;
          if (rule.contains("nonResourceURLs") && !rule["nonResourceURLs"].empty()) {
            non_resource_rules.push_back({{"verbs", rule.value("verbs", Json::array())}, {"nonResourceURLs", rule["nonResourceURLs"]}});
            continue;
          }
          Json r = {{"verbs", rule.value("verbs", Json::array())},
                    {"apiGroups", rule.value("apiGroups", Json::array())},
                    {"resources", rule.value("resources", Json::array())}};
          if (rule.contains("resourceNames") && !rule["resourceNames"].empty()) r["resourceNames"] = rule["resourceNames"];
          resource_rules.push_back(std::move(r));
        }
        return false;
      },
      &errors);
  Json out = {{"resourceRules", resource_rules}, {"nonResourceRules", non_resource_rules}, {"incomplete", !errors.empty()}};
  if (!errors.empty()) out["evaluationError"] = errors[0];
  return out;
}

ApiError forbidden(const UserInfo& user, const RequestAttributes& r, const std::string& reason) {
  std::string msg;
  if (!r.resource_request) {
    msg = "User \"" + user.name + "\" cannot " + r.verb + " path \"" + r.path + "\"";
  } else {
    std::string resource = r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
    msg = "User \"" + user.name + "\" cannot " + r.verb + " resource \"" + resource + "\" in API group \"" + r.api_group + "\"";
    msg += r.ns.empty() ? " at the cluster scope" : " in the namespace \"" + r.ns + "\"";
  }
  if (!reason.empty()) msg += ": " + reason;
  ApiError e;
  e.code = 403;
  e.reason = "Forbidden";
  if (!r.resource_request || r.resource.empty()) {
    e.message = "forbidden: " + msg;
    return e;
  }
  std::string qualified = r.api_group.empty() ? r.resource : r.resource + "." + r.api_group;
  e.message = qualified + (r.name.empty() ? "" : " \"" + r.name + "\"") + " is forbidden: " + msg;
  e.kind = r.resource;
  e.group = r.api_group;
  e.name = r.name;
  return e;
}

std::vector<Json> bootstrap_cluster_roles() {
  const Json discovery_urls = {"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                               "/readyz", "/version", "/version/"};
  return {
      cluster_role("cluster-admin", Json::array({{{"apiGroups", {"*"}}, {"resources", {"*"}}, {"verbs", {"*"}}},
                                                 {{"nonResourceURLs", {"*"}}, {"verbs", {"*"}}}})),
      cluster_role("system:discovery", Json::array({{{"nonResourceURLs", discovery_urls}, {"verbs", {"get"}}}})),
      cluster_role("system:basic-user",
                   Json::array({{{"apiGroups", {"authorization.k8s.io"}},
                                 {"resources", {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
                                 {"verbs", {"create"}}},
                                {{"apiGroups", {"authentication.k8s.io"}}, {"resources", {"selfsubjectreviews"}}, {"verbs", {"create"}}}})),
      cluster_role("system:public-info-viewer",
                   Json::array({{{"nonResourceURLs", {"/healthz", "/livez", "/readyz", "/version", "/version/"}}, {"verbs", {"get"}}}})),
  };
}

std::vector<Json> bootstrap_cluster_role_bindings() {
  return {cluster_role_binding("cluster-admin", {"system:masters"}),
          cluster_role_binding("system:discovery", {"system:authenticated"}),
          cluster_role_binding("system:basic-user", {"system:authenticated"}),
          cluster_role_binding("system:public-info-viewer", {"system:authenticated", "system:unauthenticated"})};
}

}  // namespace flotilla::devcluster
