#include "devcluster/api.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "devcluster/apply.h"
#include "devcluster/builtin_schema.h"
#include "devcluster/quantity.h"
#include "devcluster/schema.h"
#include "devcluster/selectors.h"
#include "devcluster/service_accounts.h"
#include "devcluster/strategic_merge.h"

namespace flotilla::devcluster {
namespace {

const WriteOptions kInternal{false, "", true, "", nullptr};

bool valid_dns_subdomain(const std::string& name) {
  static const std::regex re("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
  return !name.empty() && name.size() <= 253 && std::regex_match(name, re);
}

// metadata.labels and metadata.annotations as kube-apiserver validates them for every object,
// so labels an operator writes here are ones a real cluster accepts too.
std::vector<Cause> validate_labels_and_annotations(const Json& meta) {
  std::vector<Cause> causes;
  if (auto labels = meta.find("labels"); labels != meta.end() && labels->is_object())
    for (const auto& [k, v] : labels->items()) {
      std::string problem = label_key_problem(k);
      if (problem.empty() && !v.is_string()) problem = "Invalid value: " + v.dump() + ": label values must be strings";
      if (problem.empty()) problem = label_value_problem(v.get<std::string>());
      if (!problem.empty()) causes.push_back({"metadata.labels", "FieldValueInvalid", problem});
    }
  if (auto annotations = meta.find("annotations"); annotations != meta.end() && annotations->is_object()) {
    size_t total_bytes = 0;
    for (const auto& [k, v] : annotations->items()) {
      total_bytes += k.size() + (v.is_string() ? v.get_ref<const std::string&>().size() : v.dump().size());
      if (std::string problem = label_key_problem(k); !problem.empty())
        causes.push_back({"metadata.annotations", "FieldValueInvalid", problem});
    }
    if (total_bytes > 262144)
      causes.push_back({"metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes"});
  }
  return causes;
}

// Everything outside metadata (and outside status when status is a subresource).
Json spec_part(const Json& obj, bool has_status) {
  Json out = obj;
  out.erase("metadata");
  if (has_status) out.erase("status");
  out.erase("apiVersion");
  out.erase("kind");
  return out;
}

bool is_terminal_pod(const Json& pod) {
  std::string phase = pod.value("/status/phase"_json_pointer, std::string());
  return phase == "Succeeded" || phase == "Failed";
}

std::string label(const ResourceType& t) { return t.group.empty() ? t.plural : t.plural + "." + t.group; }

void default_pod_spec(Json& spec) {
  if (!spec.is_object()) return;
  if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
  if (!spec.contains("terminationGracePeriodSeconds")) spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
  if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
  // kube-apiserver defaults an empty pod security context; kubectl v1.34's `debug` reads
  // spec.securityContext.runAsUser without a nil check and panics when it is absent.
  if (!spec.contains("securityContext") || spec["securityContext"].is_null()) spec["securityContext"] = Json::object();
  if (spec.contains("containers") && spec["containers"].is_array())
    for (auto& c : spec["containers"]) {
      if (!c.is_object()) continue;
      if (!c.contains("terminationMessagePath")) c["terminationMessagePath"] = "/dev/termination-log";
      if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
      if (!c.contains("imagePullPolicy")) c["imagePullPolicy"] = "IfNotPresent";
      if (c.contains("ports") && c["ports"].is_array())
        for (auto& p : c["ports"])
          if (p.is_object() && !p.contains("protocol")) p["protocol"] = "TCP";
    }
}

void default_pod(Json& pod) {
  Json& spec = pod["spec"];
  default_pod_spec(spec);
  // The ServiceAccount admission plugin: every pod runs as one, `default` unless it names one.
  if (spec.value("serviceAccountName", "").empty()) spec["serviceAccountName"] = spec.value("serviceAccount", "default");
  if (spec.value("serviceAccountName", "").empty()) spec["serviceAccountName"] = "default";
  spec["serviceAccount"] = spec["serviceAccountName"];
  Json status = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
  if (spec.value("nodeName", "") != "")
    status["conditions"] = Json::array({{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now_rfc3339()}}});
  pod["status"] = status;
}

// apps/v1 defaults (SetDefaults_Deployment), the template's pod spec defaulted like a pod's.
void default_deployment(Json& d) {
  Json& spec = d["spec"];
  if (!spec.is_object()) return;
  if (!spec.contains("replicas")) spec["replicas"] = 1;
  if (!spec.contains("revisionHistoryLimit")) spec["revisionHistoryLimit"] = 10;
  if (!spec.contains("progressDeadlineSeconds")) spec["progressDeadlineSeconds"] = 600;
  if (!spec.contains("strategy") || !spec["strategy"].is_object()) spec["strategy"] = Json::object();
  Json& strategy = spec["strategy"];
  if (!strategy.contains("type")) strategy["type"] = "RollingUpdate";
  if (strategy["type"] == "RollingUpdate") {
    if (!strategy.contains("rollingUpdate") || !strategy["rollingUpdate"].is_object()) strategy["rollingUpdate"] = Json::object();
    if (!strategy["rollingUpdate"].contains("maxSurge")) strategy["rollingUpdate"]["maxSurge"] = "25%";
    if (!strategy["rollingUpdate"].contains("maxUnavailable")) strategy["rollingUpdate"]["maxUnavailable"] = "25%";
  }
  if (spec.contains("template") && spec["template"].is_object()) {
    if (!spec["template"].contains("metadata")) spec["template"]["metadata"] = Json::object();
    if (spec["template"].contains("spec")) default_pod_spec(spec["template"]["spec"]);
  }
}

std::vector<Cause> validate_pod_spec(const Json& spec_in, const std::string& at_spec) {
  std::vector<Cause> causes;
  const Json spec = spec_in.is_object() ? spec_in : Json::object();
  if (!spec.contains("containers") || !spec["containers"].is_array() || spec["containers"].empty()) {
    causes.push_back({at_spec + ".containers", "FieldValueRequired", "Required value"});
    return causes;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < spec["containers"].size(); ++i) {
    const Json& c = spec["containers"][i];
    std::string at = at_spec + ".containers[" + std::to_string(i) + "]";
    if (!c.is_object() || c.value("name", "").empty()) causes.push_back({at + ".name", "FieldValueRequired", "Required value"});
    else if (!names.insert(c["name"].get<std::string>()).second)
      causes.push_back({at + ".name", "FieldValueDuplicate", "Duplicate value: \"" + c["name"].get<std::string>() + "\""});
    if (c.is_object() && c.value("image", "").empty()) causes.push_back({at + ".image", "FieldValueRequired", "Required value"});
  }
  // Resource quantities (decoded as quantity strings already): never negative, and whole
  // numbers for extended resources such as nvidia.com/gpu, as kube-apiserver validates them.
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (size_t i = 0; i < spec[list].size(); ++i) {
      const Json& c = spec[list][i];
      if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
      for (const char* kind : {"limits", "requests"}) {
        const Json res = c["resources"].value(kind, Json::object());
        if (!res.is_object()) continue;
        for (const auto& [resource, q] : res.items()) {
          std::string at = at_spec + "." + list + "[" + std::to_string(i) + "].resources." + kind + "[" + resource + "]";
          std::string text = q.is_string() ? q.get<std::string>() : q.dump();
          auto value = quantity_value(q);
          if (!value) continue;  // the decode refused malformed ones
          bool extended = resource.find('/') != std::string::npos && resource.find("kubernetes.io/") == std::string::npos;
          if (*value < 0)
            causes.push_back({at, "FieldValueInvalid", "Invalid value: \"" + text + "\": must be greater than or equal to 0"});
          else if (extended && *value != std::floor(*value))
            causes.push_back({at, "FieldValueInvalid", "Invalid value: \"" + text + "\": must be an integer"});
        }
      }
    }
  }
  if (spec.contains("terminationGracePeriodSeconds") && spec["terminationGracePeriodSeconds"].is_number_integer() &&
      spec["terminationGracePeriodSeconds"].get<long long>() < 0)
    causes.push_back({at_spec + ".terminationGracePeriodSeconds", "FieldValueInvalid",
                      "Invalid value: " + spec["terminationGracePeriodSeconds"].dump() + ": must be greater than or equal to 0"});
  if (spec.contains("activeDeadlineSeconds") && spec["activeDeadlineSeconds"].is_number_integer() &&
      spec["activeDeadlineSeconds"].get<long long>() <= 0)
    causes.push_back({at_spec + ".activeDeadlineSeconds", "FieldValueInvalid",
                      "Invalid value: " + spec["activeDeadlineSeconds"].dump() + ": must be between 1 and 2147483647, inclusive"});
  std::string rp = spec.value("restartPolicy", "Always");
  if (rp != "Always" && rp != "OnFailure" && rp != "Never")
    causes.push_back({at_spec + ".restartPolicy", "FieldValueNotSupported",
                      "Unsupported value: \"" + rp + "\": supported values: \"Always\", \"OnFailure\", \"Never\""});
  return causes;
}

std::vector<Cause> validate_pod(const Json& pod) { return validate_pod_spec(pod.value("spec", Json::object()), "spec"); }

// apps/v1 Deployment validation: a selector that selects the template's labels, a valid
// template, non-negative counts.
std::vector<Cause> validate_deployment(const Json& d) {
  std::vector<Cause> causes;
  const Json spec = d.value("spec", Json::object());
  const Json selector = spec.value("selector", Json());
  const Json labels = spec.value("/template/metadata/labels"_json_pointer, Json::object());
  if (!selector.is_object() || (selector.value("matchLabels", Json::object()).empty() &&
                                selector.value("matchExpressions", Json::array()).empty())) {
    causes.push_back({"spec.selector", "FieldValueRequired", "Required value"});
  } else {
    LabelSelector parsed;
    std::string error;
    if (!label_selector_from_json(selector, &parsed, &error))
      causes.push_back({"spec.selector", "FieldValueInvalid", "Invalid value: " + selector.dump() + ": " + error});
    else if (!parsed.matches(labels))
      causes.push_back({"spec.template.metadata.labels", "FieldValueInvalid",
                        "Invalid value: " + labels.dump() + ": `selector` does not match template `labels`"});
  }
  for (const char* field : {"replicas", "minReadySeconds", "revisionHistoryLimit"})
    if (spec.contains(field) && spec[field].is_number_integer() && spec[field].get<long long>() < 0)
      causes.push_back({std::string("spec.") + field, "FieldValueInvalid",
                        "Invalid value: " + spec[field].dump() + ": must be greater than or equal to 0"});
  const std::string strategy = spec.value("/strategy/type"_json_pointer, std::string("RollingUpdate"));
  if (strategy != "RollingUpdate" && strategy != "Recreate")
    causes.push_back({"spec.strategy.type", "FieldValueNotSupported",
                      "Unsupported value: \"" + strategy + "\": supported values: \"Recreate\", \"RollingUpdate\""});
  if (strategy == "Recreate" && spec.contains("strategy") && spec["strategy"].contains("rollingUpdate"))
    causes.push_back({"spec.strategy.rollingUpdate", "FieldValueForbidden",
                      "Forbidden: may not be specified when strategy `type` is 'Recreate'"});
  if (spec.value("/template/spec/restartPolicy"_json_pointer, std::string("Always")) != "Always")
    causes.push_back({"spec.template.spec.restartPolicy", "FieldValueNotSupported",
                      "Unsupported value: \"" + spec.value("/template/spec/restartPolicy"_json_pointer, std::string()) +
                          "\": supported values: \"Always\""});
  for (auto& c : validate_pod_spec(spec.value("/template/spec"_json_pointer, Json::object()), "spec.template.spec"))
    causes.push_back(std::move(c));
  return causes;
}

void default_service(Json& svc, uint64_t rv) {
  Json& spec = svc["spec"];
  if (!spec.contains("type")) spec["type"] = "ClusterIP";
  if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
  if (!spec.contains("clusterIP") || spec["clusterIP"] == "") {
    // Deterministic per resourceVersion, inside 10.96.0.0/16, never .0 or .1.
    uint64_t n = 2 + rv % 65000;
    spec["clusterIP"] = "10.96." + std::to_string(n / 256) + "." + std::to_string(n % 256 == 0 ? 1 : n % 256);
  }
  if (spec["clusterIP"] != "None") spec["clusterIPs"] = Json::array({spec["clusterIP"]});
  if (spec.contains("ports") && spec["ports"].is_array())
    for (auto& p : spec["ports"]) {
      if (!p.contains("protocol")) p["protocol"] = "TCP";
      if (!p.contains("targetPort") && p.contains("port")) p["targetPort"] = p["port"];
    }
  if (!svc.contains("status")) svc["status"] = {{"loadBalancer", Json::object()}};
}

void default_secret(Json& secret) {
  if (!secret.contains("type")) secret["type"] = "Opaque";
  if (secret.contains("stringData") && secret["stringData"].is_object()) {
    for (auto& [k, v] : secret["stringData"].items())
      secret["data"][k] = base64_encode(v.is_string() ? v.get<std::string>() : v.dump());
    secret.erase("stringData");
  }
}

std::vector<Cause> validate_crd(const Json& crd) {
  std::vector<Cause> causes;
  const Json spec = crd.value("spec", Json::object());
  std::string group = spec.value("group", "");
  const Json names = spec.value("names", Json::object());
  std::string plural = names.value("plural", "");
  if (group.empty()) causes.push_back({"spec.group", "FieldValueRequired", "Required value"});
  if (plural.empty()) causes.push_back({"spec.names.plural", "FieldValueRequired", "Required value"});
  if (names.value("kind", "").empty()) causes.push_back({"spec.names.kind", "FieldValueRequired", "Required value"});
  std::string want = plural + "." + group;
  std::string name = crd["metadata"].value("name", "");
  if (!plural.empty() && !group.empty() && name != want)
    causes.push_back({"metadata.name", "FieldValueInvalid",
                      "Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group"});
  std::string scope = spec.value("scope", "");
  if (scope != "Namespaced" && scope != "Cluster")
    causes.push_back({"spec.scope", "FieldValueNotSupported",
                      "Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\""});
  int storage = 0;
  const Json versions = spec.value("versions", Json::array());
  if (versions.empty()) causes.push_back({"spec.versions", "FieldValueInvalid", "Invalid value: null: must have exactly one version marked as storage version"});
  for (size_t i = 0; i < versions.size(); ++i) {
    if (versions[i].value("storage", false)) ++storage;
    const Json schema = versions[i].value("schema", Json::object()).value("openAPIV3Schema", Json());
    if (schema.is_null())
      causes.push_back({"spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema", "FieldValueRequired",
                        "Required value: schemas are required"});
    else if (schema.value("type", "") != "object")
      causes.push_back({"spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema.type", "FieldValueInvalid",
                        "Invalid value: \"" + schema.value("type", "") + "\": must be object at the root"});
    else
      for (auto& c : validate_schema_definition(schema, "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema"))
        causes.push_back(std::move(c));
  }
  if (!versions.empty() && storage != 1)
    causes.push_back({"spec.versions", "FieldValueInvalid", "Invalid value: " + std::to_string(storage) +
                                                                ": must have exactly one version marked as storage version"});
  return causes;
}

// roleRef of a RoleBinding (Role or ClusterRole) or ClusterRoleBinding (ClusterRole only).
std::vector<Cause> validate_role_ref(const Json& binding, bool namespaced) {
  std::vector<Cause> causes;
  const Json ref = binding.value("roleRef", Json::object());
  const std::string kind = ref.value("kind", "");
  if (ref.value("name", "").empty()) causes.push_back({"roleRef.name", "FieldValueRequired", "Required value"});
  if (ref.value("apiGroup", "") != "rbac.authorization.k8s.io")
    causes.push_back({"roleRef.apiGroup", "FieldValueNotSupported",
                      "Unsupported value: \"" + ref.value("apiGroup", "") + "\": supported values: \"rbac.authorization.k8s.io\""});
  if (namespaced ? kind != "Role" && kind != "ClusterRole" : kind != "ClusterRole")
    causes.push_back({"roleRef.kind", "FieldValueNotSupported",
                      "Unsupported value: \"" + kind + "\": supported values: " +
                          (namespaced ? "\"ClusterRole\", \"Role\"" : "\"ClusterRole\"")});
  const Json subjects = binding.value("subjects", Json::array());
  for (size_t i = 0; i < subjects.size(); ++i) {
    const std::string at = "subjects[" + std::to_string(i) + "]";
    const std::string skind = subjects[i].value("kind", "");
    if (subjects[i].value("name", "").empty()) causes.push_back({at + ".name", "FieldValueRequired", "Required value"});
    if (skind != "User" && skind != "Group" && skind != "ServiceAccount")
      causes.push_back({at + ".kind", "FieldValueNotSupported",
                        "Unsupported value: \"" + skind + "\": supported values: \"Group\", \"ServiceAccount\", \"User\""});
    if (skind == "ServiceAccount" && !namespaced && subjects[i].value("namespace", "").empty())
      causes.push_back({at + ".namespace", "FieldValueRequired", "Required value"});
  }
  return causes;
}

// Typed decode of a built-in kind (builtin_schema.h): 400 on a wrong type; unknown fields are
// dropped with a warning, or refused under fieldValidation=Strict.
std::optional<ApiError> decode_body(const ResourceType& type, Json& body, const WriteOptions& opts,
                                    std::vector<std::string>* warnings) {
  if (opts.internal || (!type.is_crd && !has_builtin_schema(type.kind))) return std::nullopt;
  std::vector<std::string> unknown;
  if (auto e = type.is_crd ? decode_custom_resource_meta(type.kind, type.api_version(), body, &unknown)
                           : decode_builtin(type.kind, type.api_version(), body, &unknown))
    return e;
  if (unknown.empty()) return std::nullopt;
  if (opts.field_validation == "Strict") return strict_decoding_error(unknown);
  if (opts.field_validation != "Ignore")
    for (const auto& p : unknown) warnings->push_back("unknown field \"" + p + "\"");
  return std::nullopt;
}

}  // namespace

const ResourceType* type_for_storage(const Registry& registry, const std::string& storage_key) {
  for (const auto& t : registry.types())
    if (t.storage_key() == storage_key) return &t;
  return nullptr;
}

Api::Api(Store& store) : store_(store), registry_(std::make_shared<Registry>()) {}

std::shared_ptr<const Registry> Api::registry() const {
  std::lock_guard lock(registry_mutex_);
  return registry_;
}

const ResourceType* Api::storage_type(const std::string& storage_key) const {
  return type_for_storage(*registry(), storage_key);
}

void Api::reload_crds() {
  auto lock = store_.lock();
  reload_crds_locked();
}

void Api::reload_crds_locked() {
  std::vector<Json> crds;
  for (const auto& [key, obj] : store_.list_locked("apiextensions.k8s.io/customresourcedefinitions", ""))
    crds.push_back(*obj);
  auto next = std::make_shared<Registry>(*registry());
  next->rebuild_crds(crds);
  std::lock_guard lock(registry_mutex_);
  registry_ = std::move(next);
}

Outcome Api::get(const ResourceType& type, const std::string& ns, const std::string& name) {
  auto lock = store_.lock();
  ObjectPtr obj = store_.get_locked(type.storage_key(), ns, name);
  if (!obj) return Outcome::fail(not_found(type.group, type.plural, name));
  Outcome o;
  o.object = *obj;
  return o;
}

std::optional<ApiError> Api::check_crd_object(const ResourceType& type, Json& obj, const WriteOptions& opts,
                                              std::vector<std::string>* warnings) const {
  if (!type.is_crd || type.schema.is_null()) return std::nullopt;
  apply_schema_defaults(type.schema, obj);
  std::vector<std::string> pruned;
  prune_unknown_fields(type.schema, obj, &pruned);
  std::string name = obj["metadata"].value("name", "");
  if (!pruned.empty()) {
    if (opts.field_validation == "Strict") {
      std::string msg = "strict decoding error: ";
      for (size_t i = 0; i < pruned.size(); ++i) msg += (i ? ", " : "") + std::string("unknown field \"") + pruned[i] + "\"";
      ApiError e = bad_request(msg);
      return e;
    }
    if (opts.field_validation != "Ignore")
      for (const auto& p : pruned) warnings->push_back("unknown field \"" + p + "\"");
  }
  auto causes = validate_against_schema(type.schema, obj);
  if (!causes.empty()) return invalid(type.group, type.kind, name, std::move(causes));
  return std::nullopt;
}

Outcome Api::create(const ResourceType& type, const std::string& ns, Json body, const WriteOptions& opts) {
  if (!body.is_object()) return Outcome::fail(bad_request("the request body must be a JSON object"));
  std::vector<std::string> decode_warnings;
  if (auto e = decode_body(type, body, opts, &decode_warnings)) return Outcome::fail(*e);
  std::string api_version = type.api_version();
  if (body.contains("kind") && body["kind"] != type.kind)
    return Outcome::fail(bad_request("the kind in the data (" + body["kind"].dump() + ") does not match the expected kind (" +
                                     type.kind + ")"));
  if (body.contains("apiVersion") && body["apiVersion"] != api_version)
    return Outcome::fail(bad_request("the API version in the data (" + body["apiVersion"].get<std::string>() +
                                     ") does not match the expected API version (" + api_version + ")"));
  body["apiVersion"] = api_version;
  body["kind"] = type.kind;
  if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = Json::object();
  Json& meta = body["metadata"];
  std::string name = meta.value("name", "");
  if (name.empty() && !meta.value("generateName", "").empty()) name = meta["generateName"].get<std::string>() + random_suffix(5);
  if (name.empty())
    return Outcome::fail(invalid(type.group, type.kind, "", {{"metadata.name", "FieldValueRequired", "Required value: name or generateName is required"}}));
  if (type.group == "rbac.authorization.k8s.io") {
    // RBAC objects are named by path segment (ValidateRBACName): "system:discovery" is valid.
    if (name == "." || name == ".." || name.find_first_of("/%") != std::string::npos)
      return Outcome::fail(invalid(type.group, type.kind, name,
                                   {{"metadata.name", "FieldValueInvalid",
                                     "Invalid value: \"" + name + "\": may not be '.' or '..' and may not contain '/' or '%'"}}));
  } else if (!valid_dns_subdomain(name)) {
    return Outcome::fail(invalid(type.group, type.kind, name,
                                 {{"metadata.name", "FieldValueInvalid",
                                   "Invalid value: \"" + name + "\": a lowercase RFC 1123 subdomain must consist of lower case "
                                   "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"}}));
  }
  meta["name"] = name;
  if (auto causes = validate_labels_and_annotations(meta); !causes.empty())
    return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  if (type.namespaced) {
    if (meta.contains("namespace") && meta["namespace"] != "" && meta["namespace"] != ns)
      return Outcome::fail(bad_request("the namespace of the provided object does not match the namespace sent on the request"));
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  for (const char* k : {"resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})
    meta.erase(k);
  if (!opts.applied_fields.is_null()) set_managed_fields(body, opts.field_manager, opts.applied_fields, api_version, now_rfc3339());

  Outcome out;
  out.warnings = std::move(decode_warnings);
  if (type.plural == "pods" && type.group.empty()) {
    default_pod(body);
    auto causes = validate_pod(body);
    if (!causes.empty()) return Outcome::fail(invalid("", "Pod", name, std::move(causes)));
  } else if (type.plural == "namespaces" && type.group.empty()) {
    body["spec"] = {{"finalizers", Json::array({"kubernetes"})}};
    body["status"] = {{"phase", "Active"}};
    meta["labels"]["kubernetes.io/metadata.name"] = name;
  } else if (type.plural == "secrets" && type.group.empty()) {
    default_secret(body);
  } else if (type.plural == "deployments" && type.group == "apps") {
    default_deployment(body);
    if (auto causes = validate_deployment(body); !causes.empty())
      return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
    body["status"] = Json::object();
  } else if (type.plural == "rolebindings" || type.plural == "clusterrolebindings") {
    if (auto causes = validate_role_ref(body, type.plural == "rolebindings"); !causes.empty())
      return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  } else if (type.plural == "customresourcedefinitions") {
    auto causes = validate_crd(body);
    if (!causes.empty()) return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
    const Json& names = body["spec"]["names"];
    Json accepted = names;
    if (!accepted.contains("singular")) {
      std::string s = names.value("kind", "");
      std::transform(s.begin(), s.end(), s.begin(), ::tolower);
      accepted["singular"] = s;
    }
    if (!accepted.contains("listKind")) accepted["listKind"] = names.value("kind", "") + "List";
    std::string now = now_rfc3339();
    Json stored_versions = Json::array();
    for (const auto& v : body["spec"]["versions"])
      if (v.value("storage", false)) stored_versions.push_back(v["name"]);
    body["status"] = {{"acceptedNames", accepted},
                      {"storedVersions", stored_versions},
                      {"conditions", Json::array({{{"type", "NamesAccepted"}, {"status", "True"}, {"reason", "NoConflicts"},
                                                   {"message", "no conflicts found"}, {"lastTransitionTime", now}},
                                                  {{"type", "Established"}, {"status", "True"}, {"reason", "InitialNamesAccepted"},
                                                   {"message", "the initial names have been accepted"}, {"lastTransitionTime", now}}})}};
  } else if (type.is_crd) {
    if (type.has_status) body.erase("status");
    if (auto err = check_crd_object(type, body, opts, &out.warnings)) return Outcome::fail(*err);
  }

  auto lock = store_.lock();
  if (type.namespaced) {
    ObjectPtr nsobj = store_.get_locked("/namespaces", "", ns);
    if (!nsobj) return Outcome::fail(not_found("", "namespaces", ns));
    if (nsobj->contains("metadata") && (*nsobj)["metadata"].contains("deletionTimestamp"))
      return Outcome::fail({403, "Forbidden",
                            label(type) + " \"" + name + "\" is forbidden: unable to create new content in namespace " + ns +
                                " because it is being terminated",
                            type.plural, type.group, name, {}});
  }
  if (store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name))
    return Outcome::fail(already_exists(type.group, type.plural, name));
  if (type.plural == "pods" && type.group.empty()) {
    // The ServiceAccount admission plugin refuses a pod whose ServiceAccount does not exist.
    const std::string sa = body["spec"].value("serviceAccountName", "default");
    if (!store_.get_locked("/serviceaccounts", ns, sa))
      return Outcome::fail({403, "Forbidden",
                            "pods \"" + name + "\" is forbidden: error looking up service account " + ns + "/" + sa +
                                ": serviceaccount \"" + sa + "\" not found",
                            "pods", "", name, {}});
  }
  meta["uid"] = new_uid();
  meta["creationTimestamp"] = now_rfc3339();
  if (body.contains("spec") || type.is_crd) meta["generation"] = 1;
  if (type.plural == "services" && type.group.empty()) default_service(body, store_.rv_locked() + 1);
  if (opts.dry_run) {
    out.code = 201;
    out.object = body;
    return out;
  }
  std::string stored_ns = type.namespaced ? ns : "";
  store_.put_locked(type.storage_key(), stored_ns, name, std::move(body), "ADDED");
  out.code = 201;
  out.object = *store_.get_locked(type.storage_key(), stored_ns, name);
  if (type.plural == "namespaces" && type.group.empty()) ensure_default_service_account_locked(name);
  if (type.plural == "customresourcedefinitions") reload_crds_locked();
  return out;
}

Outcome Api::update(const ResourceType& type, const std::string& ns, const std::string& name, Json body,
                    bool status_subresource, const WriteOptions& opts) {
  if (!body.is_object()) return Outcome::fail(bad_request("the request body must be a JSON object"));
  auto lock = store_.lock();
  ObjectPtr current = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  return update_locked(type, ns, name, std::move(body), status_subresource, opts, current);
}

Outcome Api::update_locked(const ResourceType& type, const std::string& ns, const std::string& name, Json body,
                           bool status_subresource, const WriteOptions& opts, const ObjectPtr& current) {
  const Json& cur = *current;
  std::vector<std::string> decode_warnings;
  if (auto e = decode_body(type, body, opts, &decode_warnings)) return Outcome::fail(*e);
  if (!body.contains("metadata") || !body["metadata"].is_object()) body["metadata"] = Json::object();
  Json& meta = body["metadata"];
  std::string cur_rv = cur["metadata"].value("resourceVersion", "");
  std::string want_rv = meta.value("resourceVersion", "");
  if (!want_rv.empty() && want_rv != cur_rv)
    return Outcome::fail(conflict(type.group, type.plural, name,
                                  "the object has been modified; please apply your changes to the latest version and try again"));
  if (meta.contains("name") && meta["name"] != name)
    return Outcome::fail(bad_request("the name of the object (" + meta.value("name", "") +
                                     ") does not match the name on the URL (" + name + ")"));
  if (body.contains("kind") && body["kind"] != type.kind)
    return Outcome::fail(bad_request("the kind in the data (" + body["kind"].dump() + ") does not match the expected kind (" +
                                     type.kind + ")"));
  Json next;
  if (status_subresource && type.has_status) {
    next = cur;
    if (body.contains("status")) next["status"] = body["status"];
    else next.erase("status");
  } else {
    next = std::move(body);
    if (type.has_status) {
      if (cur.contains("status")) next["status"] = cur["status"];
      else next.erase("status");
    }
    Json& m = next["metadata"];
    for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name"}) {
      if (cur["metadata"].contains(k)) m[k] = cur["metadata"][k];
      else m.erase(k);
    }
    // managedFields as sent (apply sets them), else kept: devcluster records apply managers only.
    if (!m.contains("managedFields") && cur["metadata"].contains("managedFields")) m["managedFields"] = cur["metadata"]["managedFields"];
  }
  next["apiVersion"] = cur.value("apiVersion", type.api_version());
  next["kind"] = type.kind;
  next["metadata"]["resourceVersion"] = cur_rv;
  if (cur["metadata"].contains("generation")) next["metadata"]["generation"] = cur["metadata"]["generation"];

  if (!status_subresource)
    if (auto causes = validate_labels_and_annotations(next["metadata"]); !causes.empty())
      return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  Outcome out;
  out.warnings = std::move(decode_warnings);
  if (type.is_crd) {
    if (auto err = check_crd_object(type, next, opts, &out.warnings)) return Outcome::fail(*err);
  } else if (type.plural == "pods" && type.group.empty() && !status_subresource) {
    auto causes = validate_pod(next);
    if (!causes.empty()) return Outcome::fail(invalid("", "Pod", name, std::move(causes)));
  } else if (type.plural == "secrets" && type.group.empty()) {
    default_secret(next);
  } else if (type.plural == "deployments" && type.group == "apps" && !status_subresource) {
    default_deployment(next);
    auto causes = validate_deployment(next);
    if (next.value("/spec/selector"_json_pointer, Json()) != cur.value("/spec/selector"_json_pointer, Json()))
      causes.push_back({"spec.selector", "FieldValueInvalid",
                        "Invalid value: " + next.value("/spec/selector"_json_pointer, Json()).dump() + ": field is immutable"});
    if (!causes.empty()) return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  } else if ((type.plural == "rolebindings" || type.plural == "clusterrolebindings") &&
             type.group == "rbac.authorization.k8s.io") {
    auto causes = validate_role_ref(next, type.plural == "rolebindings");
    if (next.value("roleRef", Json()) != cur.value("roleRef", Json()))
      causes.push_back({"roleRef", "FieldValueInvalid",
                        "Invalid value: " + next.value("roleRef", Json()).dump() + ": cannot change roleRef"});
    if (!causes.empty()) return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  } else if (type.plural == "customresourcedefinitions" && type.group == "apiextensions.k8s.io" && !status_subresource) {
    // A CRD update is checked like a create: a schema that cannot be enforced is refused.
    auto causes = validate_crd(next);
    if (!causes.empty()) return Outcome::fail(invalid(type.group, type.kind, name, std::move(causes)));
  }
  if (spec_part(next, type.has_status) != spec_part(cur, type.has_status) && cur["metadata"].contains("generation"))
    next["metadata"]["generation"] = cur["metadata"]["generation"].get<long long>() + 1;
  if (next == cur) {
    out.object = cur;
    return out;
  }
  if (opts.dry_run) {
    out.object = next;
    return out;
  }
  std::string stored_ns = type.namespaced ? ns : "";
  bool finalizers_empty = !next["metadata"].contains("finalizers") || next["metadata"]["finalizers"].empty();
  if (next["metadata"].contains("deletionTimestamp") && finalizers_empty &&
      !(type.plural == "pods" && type.group.empty() && next.value("/spec/nodeName"_json_pointer, std::string()) != "" &&
        !is_terminal_pod(next) && next["metadata"].value("deletionGracePeriodSeconds", 0) > 0) &&
      !(type.plural == "namespaces" && type.group.empty())) {
    store_.put_locked(type.storage_key(), stored_ns, name, next, "MODIFIED");
    out.object = *store_.get_locked(type.storage_key(), stored_ns, name);
    remove_now_locked(type, ns, name);
    return out;
  }
  store_.put_locked(type.storage_key(), stored_ns, name, std::move(next), "MODIFIED");
  out.object = *store_.get_locked(type.storage_key(), stored_ns, name);
  if (type.plural == "customresourcedefinitions") reload_crds_locked();
  return out;
}

Outcome Api::patch(const ResourceType& type, const std::string& ns, const std::string& name,
                   const std::string& content_type, const std::string& body, bool status_subresource,
                   const WriteOptions& opts) {
  std::string ct = content_type.substr(0, content_type.find(';'));
  if (ct == "application/apply-patch+cbor")
    return Outcome::fail({415, "UnsupportedMediaType", "devcluster takes apply patches as YAML or JSON (application/apply-patch+yaml), not CBOR",
                          "", "", "", {}});
  if (ct == "application/apply-patch+yaml") {
    if (opts.field_manager.empty())
      return Outcome::fail(invalid("meta.k8s.io", "PatchOptions", "",
                                   {{"fieldManager", "FieldValueRequired", "Required value: is required for apply patch"}}));
    Json applied;
    std::string error;
    if (!parse_apply_body(body, &applied, &error)) return Outcome::fail(bad_request(error));
    return apply(type, ns, name, std::move(applied), status_subresource, opts);
  }
  if (ct == "application/strategic-merge-patch+json" && type.is_crd)
    return Outcome::fail({415, "UnsupportedMediaType",
                          "the body of the request was in an unknown format - accepted media types include: "
                          "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                          "", "", "", {}});
  if (ct != "application/merge-patch+json" && ct != "application/json-patch+json" &&
      ct != "application/strategic-merge-patch+json")
    return Outcome::fail({415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: "
                          "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
                          "", "", "", {}});
  Json patch_doc;
  try {
    patch_doc = Json::parse(body);
  } catch (const std::exception& e) {
    return Outcome::fail(bad_request(std::string("error decoding patch: ") + e.what()));
  }
  auto lock = store_.lock();
  ObjectPtr current = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  Json next;
  try {
    if (ct == "application/merge-patch+json") {
      if (!patch_doc.is_object()) return Outcome::fail(bad_request("a merge patch must be a JSON object"));
      next = *current;
      next.merge_patch(patch_doc);
    } else if (ct == "application/json-patch+json") {
      if (!patch_doc.is_array()) return Outcome::fail(bad_request("a JSON patch must be a JSON array of operations"));
      next = current->patch(patch_doc);
    } else {
      if (!patch_doc.is_object()) return Outcome::fail(bad_request("a strategic merge patch must be a JSON object"));
      next = strategic_merge_patch(*current, patch_doc);
    }
  } catch (const std::exception& e) {
    return Outcome::fail({422, "Invalid", std::string("the patch could not be applied: ") + e.what(), type.plural,
                          type.group, name, {}});
  }
  if (!next.is_object()) return Outcome::fail(bad_request("the patched object is not a JSON object"));
  return update_locked(type, ns, name, std::move(next), status_subresource, opts, current);
}

Outcome Api::apply(const ResourceType& type, const std::string& ns, const std::string& name, Json applied,
                   bool status_subresource, const WriteOptions& opts) {
  if (!applied.contains("metadata") || !applied["metadata"].is_object()) applied["metadata"] = Json::object();
  if (applied["metadata"].value("name", name) != name)
    return Outcome::fail(bad_request("the name of the object (" + applied["metadata"].value("name", "") +
                                     ") does not match the name on the URL (" + name + ")"));
  applied["metadata"]["name"] = name;
  {
    auto lock = store_.lock();
    ObjectPtr current = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
    if (current) {
      const Json fields = applied_field_set(applied);
      Json next = apply_configuration(*current, applied, managed_fields_of(*current, opts.field_manager));
      set_managed_fields(next, opts.field_manager, fields, type.api_version(), now_rfc3339());
      return update_locked(type, ns, name, std::move(next), status_subresource, opts, current);
    }
  }
  // Absent: apply creates it (kube-apiserver does too), recording the manager's fields.
  WriteOptions create_opts = opts;
  create_opts.applied_fields = applied_field_set(applied);
  Outcome o = create(type, ns, std::move(applied), create_opts);
  if (o.ok()) o.code = 201;
  return o;
}

Outcome Api::mutate(const ResourceType& type, const std::string& ns, const std::string& name,
                    const std::function<bool(Json&)>& fn, bool status_subresource) {
  auto lock = store_.lock();
  ObjectPtr current = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  Json next = *current;
  if (!fn(next)) {
    Outcome o;
    o.object = *current;
    return o;
  }
  if (status_subresource && type.has_status) {
    // Status and metadata both may change: apply the main update, then the status.
    Json status = next.contains("status") ? next["status"] : Json();
    Outcome main = update_locked(type, ns, name, next, false, kInternal, current);
    if (!main.ok()) return main;
    ObjectPtr after = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
    if (!after) return main;
    Json with_status = *after;
    if (status.is_null()) with_status.erase("status");
    else with_status["status"] = status;
    return update_locked(type, ns, name, std::move(with_status), true, kInternal, after);
  }
  return update_locked(type, ns, name, std::move(next), false, kInternal, current);
}

Outcome Api::remove_now_locked(const ResourceType& type, const std::string& ns, const std::string& name) {
  std::string stored_ns = type.namespaced ? ns : "";
  ObjectPtr current = store_.get_locked(type.storage_key(), stored_ns, name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  Outcome out;
  out.object = *current;
  if (type.plural == "customresourcedefinitions") {
    // Remove every custom resource of this definition, then the definition.
    const Json& spec = (*current)["spec"];
    std::string key = spec.value("group", "") + "/" + spec["names"].value("plural", "");
    for (const auto& [k, obj] : store_.list_locked(key, ""))
      store_.remove_locked(key, (*obj)["metadata"].value("namespace", ""), (*obj)["metadata"].value("name", ""));
  }
  store_.remove_locked(type.storage_key(), stored_ns, name);
  if (type.plural == "customresourcedefinitions") reload_crds_locked();
  return out;
}

Outcome Api::remove(const ResourceType& type, const std::string& ns, const std::string& name, const DeleteOptions& opts) {
  auto lock = store_.lock();
  std::string stored_ns = type.namespaced ? ns : "";
  ObjectPtr current = store_.get_locked(type.storage_key(), stored_ns, name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  const Json& meta = (*current)["metadata"];
  if (!opts.precondition_uid.empty() && opts.precondition_uid != meta.value("uid", ""))
    return Outcome::fail(conflict(type.group, type.plural, name,
                                  "Precondition failed: UID in precondition: " + opts.precondition_uid +
                                      ", UID in object meta: " + meta.value("uid", "")));
  if (!opts.precondition_rv.empty() && opts.precondition_rv != meta.value("resourceVersion", ""))
    return Outcome::fail(conflict(type.group, type.plural, name,
                                  "Precondition failed: ResourceVersion in precondition: " + opts.precondition_rv +
                                      ", ResourceVersion in object meta: " + meta.value("resourceVersion", "")));
  if (opts.dry_run) {
    Outcome o;
    o.object = *current;
    return o;
  }
  if (opts.propagation == "Orphan") {
    std::string uid = meta.value("uid", "");
    for (const auto& [key, obj] : store_.all_locked()) {
      const Json& om = (*obj)["metadata"];
      if (!om.contains("ownerReferences")) continue;
      Json kept = Json::array();
      for (const auto& ref : om["ownerReferences"])
        if (ref.value("uid", "") != uid) kept.push_back(ref);
      if (kept.size() == om["ownerReferences"].size()) continue;
      Json next = *obj;
      if (kept.empty()) next["metadata"].erase("ownerReferences");
      else next["metadata"]["ownerReferences"] = kept;
      std::string resource = key.substr(0, key.find('|'));
      store_.put_locked(resource, om.value("namespace", ""), om.value("name", ""), std::move(next), "MODIFIED");
    }
  }
  bool is_pod = type.plural == "pods" && type.group.empty();
  bool is_ns = type.plural == "namespaces" && type.group.empty();
  long long grace = 0;
  if (is_pod) {
    grace = opts.grace_seconds.value_or((*current)["spec"].value("terminationGracePeriodSeconds", 30LL));
    if ((*current)["spec"].value("nodeName", "") == "" || is_terminal_pod(*current)) grace = 0;
  }
  bool has_finalizers = meta.contains("finalizers") && !meta["finalizers"].empty();
  if (meta.contains("deletionTimestamp")) {
    // Already terminating: a zero grace period forces a pod out (finalizers still hold it).
    if (is_pod && grace == 0 && opts.grace_seconds.has_value() && !has_finalizers) return remove_now_locked(type, ns, name);
    Outcome o;
    o.object = *current;
    return o;
  }
  if (has_finalizers || grace > 0 || is_ns) {
    Json next = *current;
    long long now = parse_rfc3339(now_rfc3339());
    next["metadata"]["deletionTimestamp"] = rfc3339(now + grace);
    next["metadata"]["deletionGracePeriodSeconds"] = grace;
    if (is_ns) next["status"]["phase"] = "Terminating";
    store_.put_locked(type.storage_key(), stored_ns, name, std::move(next), "MODIFIED");
    Outcome o;
    o.object = *store_.get_locked(type.storage_key(), stored_ns, name);
    return o;
  }
  return remove_now_locked(type, ns, name);
}

Outcome Api::force_remove(const ResourceType& type, const std::string& ns, const std::string& name) {
  auto lock = store_.lock();
  ObjectPtr current = store_.get_locked(type.storage_key(), type.namespaced ? ns : "", name);
  if (!current) return Outcome::fail(not_found(type.group, type.plural, name));
  const Json& meta = (*current)["metadata"];
  if (meta.contains("finalizers") && !meta["finalizers"].empty()) {
    Outcome o;
    o.object = *current;
    return o;
  }
  return remove_now_locked(type, ns, name);
}

void Api::ensure_default_service_account_locked(const std::string& ns) {
  if (store_.get_locked("/serviceaccounts", ns, "default")) return;
  Json sa = default_service_account(ns);
  sa["metadata"]["uid"] = new_uid();
  sa["metadata"]["creationTimestamp"] = now_rfc3339();
  store_.put_locked("/serviceaccounts", ns, "default", std::move(sa), "ADDED");
}

void Api::ensure_default_service_accounts() {
  auto lock = store_.lock();
  for (const auto& [key, obj] : store_.list_locked("/namespaces", ""))
    if (!(*obj)["metadata"].contains("deletionTimestamp")) ensure_default_service_account_locked((*obj)["metadata"].value("name", ""));
}

Outcome Api::bind_pod(const std::string& ns, const std::string& name, const Json& binding) {
  std::string node = binding.value("/target/name"_json_pointer, std::string());
  if (node.empty())
    return Outcome::fail(invalid("", "Binding", name, {{"target.name", "FieldValueRequired", "Required value"}}));
  auto reg = registry();  // keeps `pods` alive if CRDs change meanwhile
  const ResourceType* pods = reg->find("", "v1", "pods");
  auto lock = store_.lock();
  ObjectPtr current = store_.get_locked("/pods", ns, name);
  if (!current) return Outcome::fail(not_found("", "pods", name));
  if ((*current)["spec"].value("nodeName", "") != "")
    return Outcome::fail(conflict("", "pods/binding", name,
                                  "pod " + name + " is already assigned to node \"" + (*current)["spec"].value("nodeName", "") + "\""));
  if (!store_.get_locked("/nodes", "", node)) return Outcome::fail(not_found("", "nodes", node));
  Json next = *current;
  next["spec"]["nodeName"] = node;
  Outcome main = update_locked(*pods, ns, name, next, false, kInternal, current);
  if (!main.ok()) return main;
  ObjectPtr after = store_.get_locked("/pods", ns, name);
  Json with_status = *after;
  if (!with_status["status"].is_object()) with_status["status"] = Json::object();  // a PUT of pods/status may drop it
  Json conds = with_status["status"].value("conditions", Json::array());
  {
    Json kept = Json::array();
    for (const auto& c : conds)
      if (c.value("type", "") != "PodScheduled") kept.push_back(c);
    conds = kept;
  }
  conds.push_back({{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now_rfc3339()}});
  with_status["status"]["conditions"] = conds;
  Outcome o = update_locked(*pods, ns, name, std::move(with_status), true, kInternal, after);
  if (!o.ok()) return o;
  Outcome created;
  created.code = 201;
  created.object = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", Json::object()}, {"status", "Success"}, {"code", 201}};
  return created;
}

}  // namespace flotilla::devcluster
