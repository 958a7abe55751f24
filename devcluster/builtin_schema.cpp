#include "devcluster/builtin_schema.h"

#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "devcluster/quantity.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

// The field table. Types: string, int32, int64, float64, bool, any (kept unchecked), quantity,
// intOrString, bytes (base64 string), []T, map[string]T, a struct name below, and the two
// JSONSchemaProps unions (JSONSchemaPropsOrArray, JSONSchemaPropsOrBool). Every field
// kube-apiserver's Go type has is listed, so a valid object loses nothing; the ones devcluster
// reads are typed, the rest are `any`.
constexpr const char* kTable = R"({
"ObjectMeta": {"name": "string", "generateName": "string", "namespace": "string", "selfLink": "string",
  "uid": "string", "resourceVersion": "string", "generation": "int64", "creationTimestamp": "string",
  "deletionTimestamp": "string", "deletionGracePeriodSeconds": "int64", "labels": "map[string]string",
  "annotations": "map[string]string", "ownerReferences": "[]OwnerReference", "finalizers": "[]string",
  "managedFields": "[]any"},
"OwnerReference": {"apiVersion": "string", "kind": "string", "name": "string", "uid": "string",
  "controller": "bool", "blockOwnerDeletion": "bool"},
"ObjectReference": {"kind": "string", "namespace": "string", "name": "string", "uid": "string",
  "apiVersion": "string", "resourceVersion": "string", "fieldPath": "string"},

"Pod": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "PodSpec", "status": "PodStatus"},
"PodSpec": {"volumes": "[]any", "initContainers": "[]Container", "containers": "[]Container",
  "ephemeralContainers": "[]any", "restartPolicy": "string", "terminationGracePeriodSeconds": "int64",
  "activeDeadlineSeconds": "int64", "dnsPolicy": "string", "nodeSelector": "map[string]string",
  "serviceAccountName": "string", "serviceAccount": "string", "automountServiceAccountToken": "bool",
  "nodeName": "string", "hostNetwork": "bool", "hostPID": "bool", "hostIPC": "bool",
  "shareProcessNamespace": "bool", "securityContext": "any", "imagePullSecrets": "[]any", "hostname": "string",
  "subdomain": "string", "affinity": "Affinity", "schedulerName": "string", "tolerations": "[]Toleration",
  "hostAliases": "[]any", "priorityClassName": "string", "priority": "int32", "dnsConfig": "any",
  "readinessGates": "[]any", "runtimeClassName": "string", "enableServiceLinks": "bool",
  "preemptionPolicy": "string", "overhead": "map[string]quantity", "topologySpreadConstraints": "[]any",
  "setHostnameAsFQDN": "bool", "os": "any", "hostUsers": "bool", "schedulingGates": "[]any",
  "resourceClaims": "[]any", "resources": "ResourceRequirements"},
"Container": {"name": "string", "image": "string", "command": "[]string", "args": "[]string",
  "workingDir": "string", "ports": "[]ContainerPort", "envFrom": "[]EnvFromSource", "env": "[]EnvVar",
  "resources": "ResourceRequirements", "resizePolicy": "[]any", "restartPolicy": "string",
  "volumeMounts": "[]any", "volumeDevices": "[]any", "livenessProbe": "any", "readinessProbe": "any",
  "startupProbe": "any", "lifecycle": "any", "terminationMessagePath": "string",
  "terminationMessagePolicy": "string", "imagePullPolicy": "string", "securityContext": "any",
  "stdin": "bool", "stdinOnce": "bool", "tty": "bool"},
"ContainerPort": {"name": "string", "hostPort": "int32", "containerPort": "int32", "protocol": "string",
  "hostIP": "string"},
"EnvVar": {"name": "string", "value": "string", "valueFrom": "EnvVarSource"},
"EnvVarSource": {"fieldRef": "ObjectFieldSelector", "resourceFieldRef": "any",
  "configMapKeyRef": "KeySelector", "secretKeyRef": "KeySelector"},
"ObjectFieldSelector": {"apiVersion": "string", "fieldPath": "string"},
"KeySelector": {"name": "string", "key": "string", "optional": "bool"},
"EnvFromSource": {"prefix": "string", "configMapRef": "LocalObjectRef", "secretRef": "LocalObjectRef"},
"LocalObjectRef": {"name": "string", "optional": "bool"},
"ResourceRequirements": {"limits": "map[string]quantity", "requests": "map[string]quantity", "claims": "[]any"},
"Affinity": {"nodeAffinity": "NodeAffinity", "podAffinity": "any", "podAntiAffinity": "any"},
"NodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "NodeSelector",
  "preferredDuringSchedulingIgnoredDuringExecution": "[]any"},
"NodeSelector": {"nodeSelectorTerms": "[]NodeSelectorTerm"},
"NodeSelectorTerm": {"matchExpressions": "[]NodeSelectorRequirement", "matchFields": "[]NodeSelectorRequirement"},
"NodeSelectorRequirement": {"key": "string", "operator": "string", "values": "[]string"},
"Toleration": {"key": "string", "operator": "string", "value": "string", "effect": "string",
  "tolerationSeconds": "int64"},
"PodStatus": {"phase": "string", "conditions": "[]PodCondition", "message": "string", "reason": "string",
  "nominatedNodeName": "string", "hostIP": "string", "hostIPs": "[]any", "podIP": "string", "podIPs": "[]any",
  "startTime": "string", "initContainerStatuses": "[]ContainerStatus", "containerStatuses": "[]ContainerStatus",
  "qosClass": "string", "ephemeralContainerStatuses": "[]ContainerStatus", "resize": "string",
  "resourceClaimStatuses": "[]any", "observedGeneration": "int64"},
"PodCondition": {"type": "string", "status": "string", "lastProbeTime": "string", "lastTransitionTime": "string",
  "reason": "string", "message": "string", "observedGeneration": "int64"},
"ContainerStatus": {"name": "string", "state": "any", "lastState": "any", "ready": "bool", "restartCount": "int32",
  "image": "string", "imageID": "string", "containerID": "string", "started": "bool",
  "allocatedResources": "map[string]quantity", "resources": "any", "volumeMounts": "[]any", "user": "any",
  "allocatedResourcesStatus": "[]any", "stopSignal": "string"},

"ConfigMap": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "data": "map[string]string",
  "binaryData": "map[string]bytes", "immutable": "bool"},
"Secret": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "data": "map[string]bytes",
  "stringData": "map[string]string", "type": "string", "immutable": "bool"},
"Namespace": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "NamespaceSpec",
  "status": "NamespaceStatus"},
"NamespaceSpec": {"finalizers": "[]string"},
"NamespaceStatus": {"phase": "string", "conditions": "[]any"},
"Node": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "NodeSpec", "status": "NodeStatus"},
"NodeSpec": {"podCIDR": "string", "podCIDRs": "[]string", "providerID": "string", "unschedulable": "bool",
  "taints": "[]Taint", "configSource": "any", "externalID": "string"},
"Taint": {"key": "string", "value": "string", "effect": "string", "timeAdded": "string"},
"NodeStatus": {"capacity": "map[string]quantity", "allocatable": "map[string]quantity", "phase": "string",
  "conditions": "[]NodeCondition", "addresses": "[]any", "daemonEndpoints": "any", "nodeInfo": "any",
  "images": "[]any", "volumesInUse": "[]any", "volumesAttached": "[]any", "config": "any",
  "runtimeHandlers": "[]any", "features": "any"},
"NodeCondition": {"type": "string", "status": "string", "lastHeartbeatTime": "string",
  "lastTransitionTime": "string", "reason": "string", "message": "string"},
"Event": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "involvedObject": "ObjectReference",
  "reason": "string", "message": "string", "source": "EventSource", "firstTimestamp": "string",
  "lastTimestamp": "string", "count": "int32", "type": "string", "eventTime": "string", "series": "any",
  "action": "string", "related": "ObjectReference", "reportingComponent": "string",
  "reportingInstance": "string"},
"EventSource": {"component": "string", "host": "string"},
"Lease": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "LeaseSpec"},
"LeaseSpec": {"holderIdentity": "string", "leaseDurationSeconds": "int32", "acquireTime": "string",
  "renewTime": "string", "leaseTransitions": "int32", "strategy": "string", "preferredHolder": "string"},
"Service": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "ServiceSpec",
  "status": "ServiceStatus"},
"ServiceSpec": {"ports": "[]ServicePort", "selector": "map[string]string", "clusterIP": "string",
  "clusterIPs": "[]string", "type": "string", "externalIPs": "[]string", "sessionAffinity": "string",
  "loadBalancerIP": "string", "loadBalancerSourceRanges": "[]string", "externalName": "string",
  "externalTrafficPolicy": "string", "healthCheckNodePort": "int32", "publishNotReadyAddresses": "bool",
  "sessionAffinityConfig": "any", "ipFamilies": "[]string", "ipFamilyPolicy": "string",
  "allocateLoadBalancerNodePorts": "bool", "loadBalancerClass": "string", "internalTrafficPolicy": "string",
  "trafficDistribution": "string"},
"ServicePort": {"name": "string", "protocol": "string", "appProtocol": "string", "port": "int32",
  "targetPort": "intOrString", "nodePort": "int32"},
"ServiceStatus": {"loadBalancer": "any", "conditions": "[]any"},
"ServiceAccount": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "secrets": "[]ObjectReference",
  "imagePullSecrets": "[]any", "automountServiceAccountToken": "bool"},

"Deployment": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "DeploymentSpec",
  "status": "DeploymentStatus"},
"DeploymentSpec": {"replicas": "int32", "selector": "LabelSelector", "template": "PodTemplateSpec",
  "strategy": "DeploymentStrategy", "minReadySeconds": "int32", "revisionHistoryLimit": "int32", "paused": "bool",
  "progressDeadlineSeconds": "int32"},
"PodTemplateSpec": {"metadata": "ObjectMeta", "spec": "PodSpec"},
"LabelSelector": {"matchLabels": "map[string]string", "matchExpressions": "[]LabelSelectorRequirement"},
"LabelSelectorRequirement": {"key": "string", "operator": "string", "values": "[]string"},
"DeploymentStrategy": {"type": "string", "rollingUpdate": "RollingUpdateDeployment"},
"RollingUpdateDeployment": {"maxUnavailable": "intOrString", "maxSurge": "intOrString"},
"DeploymentStatus": {"observedGeneration": "int64", "replicas": "int32", "updatedReplicas": "int32",
  "readyReplicas": "int32", "availableReplicas": "int32", "unavailableReplicas": "int32",
  "terminatingReplicas": "int32", "conditions": "[]DeploymentCondition", "collisionCount": "int32"},
"DeploymentCondition": {"type": "string", "status": "string", "lastUpdateTime": "string",
  "lastTransitionTime": "string", "reason": "string", "message": "string"},
"ReplicaSet": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "spec": "ReplicaSetSpec",
  "status": "ReplicaSetStatus"},
"ReplicaSetSpec": {"replicas": "int32", "minReadySeconds": "int32", "selector": "LabelSelector",
  "template": "PodTemplateSpec"},
"ReplicaSetStatus": {"replicas": "int32", "fullyLabeledReplicas": "int32", "readyReplicas": "int32",
  "availableReplicas": "int32", "terminatingReplicas": "int32", "observedGeneration": "int64", "conditions": "[]any"},
"PodDisruptionBudget": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta",
  "spec": "PodDisruptionBudgetSpec", "status": "PodDisruptionBudgetStatus"},
"PodDisruptionBudgetSpec": {"minAvailable": "intOrString", "selector": "LabelSelector",
  "maxUnavailable": "intOrString", "unhealthyPodEvictionPolicy": "string"},
"PodDisruptionBudgetStatus": {"observedGeneration": "int64", "disruptedPods": "map[string]string",
  "disruptionsAllowed": "int32", "currentHealthy": "int32", "desiredHealthy": "int32", "expectedPods": "int32",
  "conditions": "[]any"},
"Role": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "rules": "[]PolicyRule"},
"ClusterRole": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "rules": "[]PolicyRule",
  "aggregationRule": "any"},
"PolicyRule": {"verbs": "[]string", "apiGroups": "[]string", "resources": "[]string", "resourceNames": "[]string",
  "nonResourceURLs": "[]string"},
"RoleBinding": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "subjects": "[]Subject",
  "roleRef": "RoleRef"},
"ClusterRoleBinding": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "subjects": "[]Subject",
  "roleRef": "RoleRef"},
"Subject": {"kind": "string", "apiGroup": "string", "name": "string", "namespace": "string"},
"RoleRef": {"apiGroup": "string", "kind": "string", "name": "string"},
"CustomResourceDefinition": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta",
  "spec": "CustomResourceDefinitionSpec", "status": "any"},
"CustomResourceDefinitionSpec": {"group": "string", "names": "CustomResourceDefinitionNames", "scope": "string",
  "versions": "[]CustomResourceDefinitionVersion", "conversion": "any", "preserveUnknownFields": "bool"},
"CustomResourceDefinitionNames": {"plural": "string", "singular": "string", "shortNames": "[]string",
  "kind": "string", "listKind": "string", "categories": "[]string"},
"CustomResourceDefinitionVersion": {"name": "string", "served": "bool", "storage": "bool", "deprecated": "bool",
  "deprecationWarning": "string", "schema": "CustomResourceValidation", "subresources": "any",
  "additionalPrinterColumns": "[]CustomResourceColumnDefinition", "selectableFields": "[]SelectableField"},
"CustomResourceValidation": {"openAPIV3Schema": "JSONSchemaProps"},
"CustomResourceColumnDefinition": {"name": "string", "type": "string", "format": "string", "description": "string",
  "priority": "int32", "jsonPath": "string"},
"SelectableField": {"jsonPath": "string"},
"Binding": {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta", "target": "ObjectReference"},
"DeleteOptions": {"apiVersion": "string", "kind": "string", "gracePeriodSeconds": "int64",
  "preconditions": "Preconditions", "orphanDependents": "bool", "propagationPolicy": "string",
  "dryRun": "[]string", "ignoreStoreReadErrorWithClusterBreakingPotential": "bool"},
"Preconditions": {"uid": "string", "resourceVersion": "string"},
"JSONSchemaProps": {"id": "string", "$schema": "string", "$ref": "string", "description": "string",
  "type": "string", "format": "string", "title": "string", "default": "any", "maximum": "float64",
  "exclusiveMaximum": "bool", "minimum": "float64", "exclusiveMinimum": "bool", "maxLength": "int64",
  "minLength": "int64", "pattern": "string", "maxItems": "int64", "minItems": "int64", "uniqueItems": "bool",
  "multipleOf": "float64", "enum": "[]any", "maxProperties": "int64", "minProperties": "int64",
  "required": "[]string", "items": "JSONSchemaPropsOrArray", "allOf": "[]JSONSchemaProps",
  "oneOf": "[]JSONSchemaProps", "anyOf": "[]JSONSchemaProps", "not": "JSONSchemaProps",
  "properties": "map[string]JSONSchemaProps", "additionalProperties": "JSONSchemaPropsOrBool",
  "patternProperties": "map[string]JSONSchemaProps", "dependencies": "any",
  "additionalItems": "JSONSchemaPropsOrBool", "definitions": "map[string]JSONSchemaProps", "externalDocs": "any",
  "example": "any", "nullable": "bool", "x-kubernetes-preserve-unknown-fields": "bool",
  "x-kubernetes-embedded-resource": "bool", "x-kubernetes-int-or-string": "bool",
  "x-kubernetes-list-map-keys": "[]string", "x-kubernetes-list-type": "string",
  "x-kubernetes-map-type": "string", "x-kubernetes-validations": "[]any"}
})";

enum class Kind { String, Int32, Int64, Float64, Bool, Any, Quantity, IntOrString, Bytes, Array, Map, Struct, SchemaOrArray, SchemaOrBool };

struct Struct;
struct Type {
  Kind kind = Kind::Any;
  const Type* elem = nullptr;    // Array, Map
  const Struct* st = nullptr;    // Struct, and the schema unions (JSONSchemaProps)
  std::string go_name;           // for messages: "string", "[]v1.Container", "map[string]string"
};
struct Struct {
  std::string name;
  std::map<std::string, const Type*> fields;
};

class Tables {
 public:
  Tables() {
    Json table = Json::parse(kTable);
    for (auto& [name, fields] : table.items()) {
      structs_[name].name = name;
    }
    for (auto& [name, fields] : table.items())
      for (auto& [field, type] : fields.items()) structs_[name].fields[field] = type_of(type.get<std::string>());
  }
  const Struct* find(const std::string& name) const {
    auto it = structs_.find(name);
    return it == structs_.end() ? nullptr : &it->second;
  }

 private:
  const Type* type_of(const std::string& s) {
    if (auto it = interned_.find(s); it != interned_.end()) return it->second;
    Type t;
    static const std::map<std::string, Kind> kScalars = {
        {"string", Kind::String}, {"int32", Kind::Int32}, {"int64", Kind::Int64}, {"float64", Kind::Float64},
        {"bool", Kind::Bool}, {"any", Kind::Any}, {"quantity", Kind::Quantity}, {"intOrString", Kind::IntOrString},
        {"bytes", Kind::Bytes}};
    if (auto k = kScalars.find(s); k != kScalars.end()) {
      t.kind = k->second;
      t.go_name = s == "quantity" ? "resource.Quantity" : s == "intOrString" ? "intstr.IntOrString"
                  : s == "bytes" ? "[]uint8" : s == "any" ? "interface {}" : s;
    } else if (s.rfind("[]", 0) == 0) {
      t.kind = Kind::Array;
      t.elem = type_of(s.substr(2));
      t.go_name = "[]" + t.elem->go_name;
    } else if (s.rfind("map[string]", 0) == 0) {
      t.kind = Kind::Map;
      t.elem = type_of(s.substr(11));
      t.go_name = "map[string]" + t.elem->go_name;
    } else if (s == "JSONSchemaPropsOrArray" || s == "JSONSchemaPropsOrBool") {
      t.kind = s == "JSONSchemaPropsOrArray" ? Kind::SchemaOrArray : Kind::SchemaOrBool;
      t.st = &structs_.at("JSONSchemaProps");
      t.go_name = "v1." + s;
    } else {
      t.kind = Kind::Struct;
      t.st = &structs_.at(s);  // a typo in the table fails at first use, in every test
      t.go_name = "v1." + s;
    }
    types_.push_back(std::move(t));
    return interned_[s] = &types_.back();
  }

  std::map<std::string, Struct> structs_;
  std::deque<Type> types_;
  std::map<std::string, const Type*> interned_;
};

const Tables& tables() {
  static const Tables t;
  return t;
}

// Go's name for a JSON value in "cannot unmarshal X into ...".
std::string json_kind(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "bool";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "number";
}

// First byte of `s` that makes it invalid standard base64 (-1 when valid), as Go reports it.
long long base64_problem(const std::string& s) {
  size_t n = 0, pad = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r' || c == '\n') continue;
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (c == '=') {
      if (n % 4 < 2 || ++pad > 2) return static_cast<long long>(i);
    } else if (!alpha || pad > 0) {
      return static_cast<long long>(i);
    }
    ++n;
  }
  if (n % 4 != 0) return static_cast<long long>(s.size());
  return -1;
}

struct Walk {
  std::string path;        // "spec.containers[0].command[1]": causes and unknown fields
  std::string go_path;     // "spec.containers.command": Go's message
  std::string owner;       // innermost struct holding the field being decoded
  std::string error;       // first problem: the part after "cannot be handled as a Kind: "
  std::string error_path;
  std::vector<std::string>* unknown = nullptr;
};

void fail(Walk& w, const std::string& message) {
  if (!w.error.empty()) return;
  w.error = message;
  w.error_path = w.path;
}

void type_error(Walk& w, const Json& v, const Type& t) {
  fail(w, "json: cannot unmarshal " + json_kind(v) + " into Go struct field " + w.owner + "." + w.go_path + " of type " +
              t.go_name);
}

void number_error(Walk& w, const Json& v, const Type& t) {
  fail(w, "json: cannot unmarshal number " + v.dump() + " into Go struct field " + w.owner + "." + w.go_path +
              " of type " + t.go_name);
}

Json zero_value(const Type& t) {
  switch (t.kind) {
    case Kind::String:
    case Kind::Bytes:
      return "";
    case Kind::Int32:
    case Kind::Int64:
    case Kind::Float64:
      return 0;
    case Kind::Bool:
      return false;
    case Kind::Struct:
      return Json::object();
    case Kind::Quantity:
      return "0";
    default:
      return nullptr;
  }
}

void decode_value(const Type& t, Json& v, Walk& w);

void decode_struct(const Struct& st, Json& v, Walk& w) {
  const std::string saved_owner = w.owner;
  w.owner = st.name;
  for (auto it = v.begin(); it != v.end() && w.error.empty();) {
    const std::string key = it.key();
    const size_t path_len = w.path.size(), go_len = w.go_path.size();
    w.path += (w.path.empty() ? "" : ".") + key;
    w.go_path += (w.go_path.empty() ? "" : ".") + key;
    auto f = st.fields.find(key);
    if (f == st.fields.end()) {
      if (w.unknown) w.unknown->push_back(w.path);
      it = v.erase(it);
    } else if (it->is_null()) {
      it = v.erase(it);  // Go's zero value, omitted when encoded again
    } else {
      decode_value(*f->second, *it, w);
      ++it;
    }
    w.path.resize(path_len);
    w.go_path.resize(go_len);
  }
  w.owner = saved_owner;
}

void decode_value(const Type& t, Json& v, Walk& w) {
  switch (t.kind) {
    case Kind::Any:
      return;
    case Kind::String:
      if (!v.is_string()) type_error(w, v, t);
      return;
    case Kind::Bytes:
      if (!v.is_string()) return type_error(w, v, t);
      if (long long at = base64_problem(v.get_ref<const std::string&>()); at >= 0)
        fail(w, "illegal base64 data at input byte " + std::to_string(at));
      return;
    case Kind::Bool:
      if (!v.is_boolean()) type_error(w, v, t);
      return;
    case Kind::Float64:
      if (!v.is_number()) type_error(w, v, t);
      return;
    case Kind::Int32:
    case Kind::Int64: {
      if (!v.is_number()) return type_error(w, v, t);
      if (v.is_number_float()) return number_error(w, v, t);
      const long long lo = t.kind == Kind::Int32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
      const long long hi = t.kind == Kind::Int32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
      if (v.is_number_unsigned() ? v.get<unsigned long long>() > static_cast<unsigned long long>(hi)
                                 : v.get<long long>() < lo || v.get<long long>() > hi)
        number_error(w, v, t);
      return;
    }
    case Kind::IntOrString:
      if (v.is_string()) return;
      if (!v.is_number()) return type_error(w, v, t);
      if (v.is_number_float() || (v.is_number_unsigned() ? v.get<unsigned long long>() > INT32_MAX
                                                         : v.get<long long>() < INT32_MIN || v.get<long long>() > INT32_MAX))
        number_error(w, v, t);
      return;
    case Kind::Quantity:
      if (!v.is_string() && !v.is_number()) return type_error(w, v, t);
      if (v.is_number()) v = v.dump();  // Go re-encodes a Quantity as a string
      if (!parse_quantity(v.get_ref<const std::string&>()))
        fail(w, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
      return;
    case Kind::Array: {
      if (!v.is_array()) return type_error(w, v, t);
      const size_t path_len = w.path.size();
      for (size_t i = 0; i < v.size() && w.error.empty(); ++i) {
        w.path += "[" + std::to_string(i) + "]";
        if (v[i].is_null()) v[i] = zero_value(*t.elem);
        else decode_value(*t.elem, v[i], w);
        w.path.resize(path_len);
      }
      return;
    }
    case Kind::Map: {
      if (!v.is_object()) return type_error(w, v, t);
      const size_t path_len = w.path.size();
      for (auto it = v.begin(); it != v.end() && w.error.empty(); ++it) {
        w.path += "[" + it.key() + "]";
        if (it->is_null()) *it = zero_value(*t.elem);
        else decode_value(*t.elem, *it, w);
        w.path.resize(path_len);
      }
      return;
    }
    case Kind::Struct:
      if (!v.is_object()) return type_error(w, v, t);
      return decode_struct(*t.st, v, w);
    case Kind::SchemaOrArray:
      if (v.is_object()) return decode_struct(*t.st, v, w);
      if (v.is_array()) {
        const size_t path_len = w.path.size();
        for (size_t i = 0; i < v.size() && w.error.empty(); ++i) {
          w.path += "[" + std::to_string(i) + "]";
          if (!v[i].is_object()) type_error(w, v[i], t);
          else decode_struct(*t.st, v[i], w);
          w.path.resize(path_len);
        }
        return;
      }
      return fail(w, "json: cannot unmarshal " + json_kind(v) + " into Go struct field " + w.owner + "." + w.go_path +
                          " of type " + t.go_name + ": JSONSchemaPropsOrArray must be an object or an array");
    case Kind::SchemaOrBool:
      if (v.is_boolean()) return;
      if (v.is_object()) return decode_struct(*t.st, v, w);
      return fail(w, "json: cannot unmarshal " + json_kind(v) + " into Go struct field " + w.owner + "." + w.go_path +
                          " of type " + t.go_name + ": JSONSchemaPropsOrBool must be a boolean or an object");
  }
}

}  // namespace

bool has_builtin_schema(const std::string& kind) {
  const Struct* st = tables().find(kind);
  return st != nullptr && st->fields.count("metadata") > 0;  // a kind, not one of its parts
}

namespace {

std::optional<ApiError> decode_with(const Struct* st, const std::string& kind, const std::string& api_version,
                                    Json& object, std::vector<std::string>* unknown_fields, bool meta_only) {
  if (!st || !object.is_object()) return std::nullopt;
  // kube-apiserver reads apiVersion and kind before the typed decode, with its own message.
  for (const char* key : {"apiVersion", "kind", "metadata"})
    if (auto it = object.find(key); it != object.end() && it->is_null()) object.erase(it);  // Go: ""/absent
  for (const char* key : {"apiVersion", "kind"})
    if (auto it = object.find(key); it != object.end() && !it->is_string()) {
      ApiError e = bad_request("couldn't get version/kind; json parse error: json: cannot unmarshal " + json_kind(*it) +
                               " into Go struct field ." + key + " of type string");
      e.causes.push_back({key, "FieldValueInvalid", e.message});
      return e;
    }
  Walk w;
  w.unknown = unknown_fields;
  if (meta_only) {
    w.owner = kind;
    if (auto m = object.find("metadata"); m != object.end() && !m->is_null()) {
      w.path = w.go_path = "metadata";
      static const Type meta_type{Kind::Struct, nullptr, tables().find("ObjectMeta"), "v1.ObjectMeta"};
      decode_value(meta_type, *m, w);
    }
  } else {
    decode_struct(*st, object, w);
  }
  if (w.error.empty()) return std::nullopt;
  std::string version = api_version.substr(api_version.find('/') + 1);
  ApiError e = bad_request(kind + " in version \"" + version + "\" cannot be handled as a " + kind + ": " + w.error);
  e.causes.push_back({w.error_path, "FieldValueInvalid", w.error});
  return e;
}

}  // namespace

std::optional<ApiError> decode_builtin(const std::string& kind, const std::string& api_version, Json& object,
                                       std::vector<std::string>* unknown_fields) {
  return decode_with(tables().find(kind), kind, api_version, object, unknown_fields, false);
}

std::optional<ApiError> decode_custom_resource_meta(const std::string& kind, const std::string& api_version, Json& object,
                                                   std::vector<std::string>* unknown_fields) {
  return decode_with(tables().find("ObjectMeta"), kind, api_version, object, unknown_fields, true);
}

ApiError strict_decoding_error(const std::vector<std::string>& unknown_fields) {
  std::string msg = "strict decoding error: ";
  for (size_t i = 0; i < unknown_fields.size(); ++i)
    msg += (i ? ", " : "") + std::string("unknown field \"") + unknown_fields[i] + "\"";
  return bad_request(msg);
}

}  // namespace flotilla::devcluster
