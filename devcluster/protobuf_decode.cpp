#include "devcluster/protobuf_decode.h"

#include <functional>
#include <nlohmann/json.hpp>

#include "devcluster/api_types.h"

namespace flotilla::devcluster {
namespace {

using Json = nlohmann::json;

struct Field {
  int number = 0;
  int wire = 0;
  uint64_t varint = 0;
  std::string bytes;
};

// Calls fn for every field of a message; false on truncated input.
bool for_each_field(const std::string& msg, const std::function<void(const Field&)>& fn) {
  size_t pos = 0;
  auto read_varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= msg.size()) return false;
      unsigned char b = static_cast<unsigned char>(msg[pos++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (pos < msg.size()) {
    uint64_t key;
    if (!read_varint(&key)) return false;
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      if (!read_varint(&f.varint)) return false;
    } else if (f.wire == 2) {
      uint64_t len;
      if (!read_varint(&len) || pos + len > msg.size()) return false;
      f.bytes = msg.substr(pos, len);
      pos += len;
    } else if (f.wire == 1) {
      if (pos + 8 > msg.size()) return false;
      pos += 8;
    } else if (f.wire == 5) {
      if (pos + 4 > msg.size()) return false;
      pos += 4;
    } else {
      return false;
    }
    fn(f);
  }
  return true;
}

std::pair<std::string, std::string> map_entry(const std::string& bytes) {
  std::pair<std::string, std::string> kv;
  for_each_field(bytes, [&](const Field& f) {
    if (f.number == 1) kv.first = f.bytes;
    if (f.number == 2) kv.second = f.bytes;
  });
  return kv;
}

Json owner_reference(const std::string& bytes) {
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    switch (f.number) {
      case 1: o["kind"] = f.bytes; break;
      case 3: o["name"] = f.bytes; break;
      case 4: o["uid"] = f.bytes; break;
      case 5: o["apiVersion"] = f.bytes; break;
      case 6: o["controller"] = f.varint != 0; break;
      case 7: o["blockOwnerDeletion"] = f.varint != 0; break;
    }
  });
  return o;
}

Json object_meta(const std::string& bytes) {
  Json m = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    switch (f.number) {
      case 1: if (!f.bytes.empty()) m["name"] = f.bytes; break;
      case 2: if (!f.bytes.empty()) m["generateName"] = f.bytes; break;
      case 3: if (!f.bytes.empty()) m["namespace"] = f.bytes; break;
      case 6: if (!f.bytes.empty()) m["resourceVersion"] = f.bytes; break;
      case 11: { auto kv = map_entry(f.bytes); m["labels"][kv.first] = kv.second; break; }
      case 12: { auto kv = map_entry(f.bytes); m["annotations"][kv.first] = kv.second; break; }
      case 13: m["ownerReferences"].push_back(owner_reference(f.bytes)); break;
      case 14: m["finalizers"].push_back(f.bytes); break;
    }
  });
  return m;
}

// authorization.k8s.io/v1 ResourceAttributes and NonResourceAttributes.
Json resource_attributes(const std::string& bytes) {
  static const char* names[] = {"", "namespace", "verb", "group", "version", "resource", "subresource", "name"};
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.number >= 1 && f.number <= 7 && f.wire == 2) o[names[f.number]] = f.bytes;
  });
  return o;
}

Json non_resource_attributes(const std::string& bytes) {
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.number == 1) o["path"] = f.bytes;
    if (f.number == 2) o["verb"] = f.bytes;
  });
  return o;
}

// The spec of an access or rules review, or of a TokenRequest (field 2 of each).
Json review_spec(const std::string& kind, const std::string& bytes) {
  Json spec = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (kind == "SelfSubjectRulesReview") {
      if (f.number == 1) spec["namespace"] = f.bytes;
    } else if (kind == "TokenRequest") {
      if (f.number == 1) spec["audiences"].push_back(f.bytes);
      if (f.number == 4) spec["expirationSeconds"] = static_cast<long long>(f.varint);
    } else {
      if (f.number == 1) spec["resourceAttributes"] = resource_attributes(f.bytes);
      if (f.number == 2) spec["nonResourceAttributes"] = non_resource_attributes(f.bytes);
      if (kind == "SubjectAccessReview" && f.number == 3) spec["user"] = f.bytes;
      if (kind == "SubjectAccessReview" && f.number == 4) spec["groups"].push_back(f.bytes);
      if (kind == "SubjectAccessReview" && f.number == 6) spec["uid"] = f.bytes;
    }
  });
  return spec;
}

// rbac.authorization.k8s.io/v1 PolicyRule, Subject and RoleRef.
Json policy_rule(const std::string& bytes) {
  static const char* names[] = {"", "verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"};
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.number >= 1 && f.number <= 5 && f.wire == 2) o[names[f.number]].push_back(f.bytes);
  });
  return o;
}

Json rbac_reference(const std::string& bytes, bool subject) {
  // Subject: kind=1 apiGroup=2 name=3 namespace=4; RoleRef: apiGroup=1 kind=2 name=3.
  static const char* subject_names[] = {"", "kind", "apiGroup", "name", "namespace"};
  static const char* ref_names[] = {"", "apiGroup", "kind", "name"};
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.wire != 2 || f.number < 1 || f.number > (subject ? 4 : 3)) return;
    if (!f.bytes.empty() || (!subject && f.number == 1)) o[(subject ? subject_names : ref_names)[f.number]] = f.bytes;
  });
  return o;
}

// apps/v1 Deployment, as `kubectl create deployment` sends it: the fields that command sets are
// decoded; any other field makes *unknown true (the caller refuses the body rather than drop it).
// gogo-protobuf writes every non-pointer field, zero or not: a zero value is "not set".
bool is_zero(const Field& f) { return (f.wire == 0 && f.varint == 0) || (f.wire == 2 && f.bytes.empty()); }

void strings_map_entry_into(Json& into, const std::string& bytes) {
  auto kv = map_entry(bytes);
  into[kv.first] = kv.second;
}

Json label_selector(const std::string& bytes, std::string* unknown) {
  Json o = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.number == 1) strings_map_entry_into(o["matchLabels"], f.bytes);
    else if (!is_zero(f)) *unknown = "LabelSelector field " + std::to_string(f.number);
  });
  return o;
}

Json container(const std::string& bytes, std::string* unknown) {
  Json c = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    switch (f.number) {
      case 1: if (!f.bytes.empty()) c["name"] = f.bytes; break;
      case 2: if (!f.bytes.empty()) c["image"] = f.bytes; break;
      case 3: c["command"].push_back(f.bytes); break;
      case 4: c["args"].push_back(f.bytes); break;
      case 6: {  // ContainerPort: name=1 hostPort=2 containerPort=3 protocol=4
        Json port = Json::object();
        for_each_field(f.bytes, [&](const Field& p) {
          if (is_zero(p)) return;
          if (p.number == 1) port["name"] = p.bytes;
          else if (p.number == 3) port["containerPort"] = static_cast<int>(p.varint);
          else if (p.number == 4) port["protocol"] = p.bytes;
          else *unknown = "ContainerPort field " + std::to_string(p.number);
        });
        c["ports"].push_back(port);
        break;
      }
      case 8:  // ResourceRequirements: kubectl sends it empty
        if (!is_zero(f)) *unknown = "Container.resources";
        c["resources"] = Json::object();
        break;
      case 13: if (!f.bytes.empty()) c["terminationMessagePath"] = f.bytes; break;
      case 14: if (!f.bytes.empty()) c["imagePullPolicy"] = f.bytes; break;
      case 20: if (!f.bytes.empty()) c["terminationMessagePolicy"] = f.bytes; break;
      default: if (!is_zero(f)) *unknown = "Container field " + std::to_string(f.number);
    }
  });
  return c;
}

Json pod_template(const std::string& bytes, std::string* unknown) {
  Json t = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    if (f.number == 1) {
      t["metadata"] = object_meta(f.bytes);
    } else if (f.number == 2) {
      Json spec = Json::object();
      for_each_field(f.bytes, [&](const Field& s) {
        if (s.number == 2) spec["containers"].push_back(container(s.bytes, unknown));
        else if (s.number == 4) spec["terminationGracePeriodSeconds"] = static_cast<long long>(s.varint);
        else if (is_zero(s)) return;
        else if (s.number == 3) spec["restartPolicy"] = s.bytes;
        else if (s.number == 6) spec["dnsPolicy"] = s.bytes;
        else if (s.number == 19) spec["schedulerName"] = s.bytes;
        else *unknown = "PodSpec field " + std::to_string(s.number);
      });
      t["spec"] = spec;
    } else {
      if (!is_zero(f)) *unknown = "PodTemplateSpec field " + std::to_string(f.number);
    }
  });
  return t;
}

Json deployment_spec(const std::string& bytes, std::string* unknown) {
  Json spec = Json::object();
  for_each_field(bytes, [&](const Field& f) {
    switch (f.number) {
      case 1: spec["replicas"] = static_cast<int>(f.varint); break;
      case 2: spec["selector"] = label_selector(f.bytes, unknown); break;
      case 3: spec["template"] = pod_template(f.bytes, unknown); break;
      case 4:  // DeploymentStrategy: type=1; rollingUpdate=2 is not decoded
        for_each_field(f.bytes, [&](const Field& t) {
          if (t.number == 1 && !t.bytes.empty()) spec["strategy"]["type"] = t.bytes;
          else if (t.number != 1 && !is_zero(t)) *unknown = "DeploymentStrategy field " + std::to_string(t.number);
        });
        break;
      case 5: spec["minReadySeconds"] = static_cast<int>(f.varint); break;
      case 6: spec["revisionHistoryLimit"] = static_cast<int>(f.varint); break;
      case 7: spec["paused"] = f.varint != 0; break;
      case 9: spec["progressDeadlineSeconds"] = static_cast<int>(f.varint); break;
      default: if (!is_zero(f)) *unknown = "DeploymentSpec field " + std::to_string(f.number);
    }
  });
  return spec;
}

bool is_rbac_kind(const std::string& kind) {
  return kind == "Role" || kind == "ClusterRole" || kind == "RoleBinding" || kind == "ClusterRoleBinding";
}

bool is_review_kind(const std::string& kind) {
  return kind == "SelfSubjectAccessReview" || kind == "SubjectAccessReview" || kind == "SelfSubjectRulesReview" ||
         kind == "TokenRequest";
}

bool valid_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

bool decode_kubernetes_protobuf(const std::string& body, Json* out, std::string* error) {
  if (body.size() < 4 || body.compare(0, 4, std::string("k8s\0", 4)) != 0) {
    *error = "protobuf body without the k8s magic prefix";
    return false;
  }
  std::string api_version, kind, raw;
  bool ok = for_each_field(body.substr(4), [&](const Field& f) {
    if (f.number == 1)
      for_each_field(f.bytes, [&](const Field& t) {
        if (t.number == 1) api_version = t.bytes;
        if (t.number == 2) kind = t.bytes;
      });
    if (f.number == 2) raw = f.bytes;
  });
  if (!ok) {
    *error = "truncated protobuf body";
    return false;
  }
  Json obj = {{"apiVersion", api_version}, {"kind", kind}};
  bool known = true;
  std::string unknown_field;  // a field devcluster does not decode for this kind
  ok = for_each_field(raw, [&](const Field& f) {
    if (f.number == 1 && f.wire == 2) {
      obj["metadata"] = object_meta(f.bytes);
      return;
    }
    if (kind == "Namespace") {
      if (f.number == 2)
        for_each_field(f.bytes, [&](const Field& s) {
          if (s.number == 1) obj["spec"]["finalizers"].push_back(s.bytes);
        });
    } else if (kind == "ConfigMap") {
      if (f.number == 2) {
        auto kv = map_entry(f.bytes);
        obj["data"][kv.first] = kv.second;
      } else if (f.number == 3) {
        auto kv = map_entry(f.bytes);
        obj["binaryData"][kv.first] = base64_encode(kv.second);
      } else if (f.number == 4) {
        obj["immutable"] = f.varint != 0;
      }
    } else if (kind == "Secret") {
      if (f.number == 2) {
        auto kv = map_entry(f.bytes);
        obj["data"][kv.first] = base64_encode(kv.second);
      } else if (f.number == 3) {
        obj["type"] = f.bytes;
      } else if (f.number == 4) {
        auto kv = map_entry(f.bytes);
        obj["stringData"][kv.first] = kv.second;
      } else if (f.number == 5) {
        obj["immutable"] = f.varint != 0;
      }
    } else if (kind == "ServiceAccount") {
      if (f.number == 4) obj["automountServiceAccountToken"] = f.varint != 0;
    } else if (kind == "Deployment") {
      if (f.number == 2) obj["spec"] = deployment_spec(f.bytes, &unknown_field);
      else if (f.number != 3 && !is_zero(f)) unknown_field = "Deployment field " + std::to_string(f.number);  // 3: status
      if (!unknown_field.empty()) known = false;
    } else if (kind == "Role" || kind == "ClusterRole") {
      if (f.number == 2) obj["rules"].push_back(policy_rule(f.bytes));
    } else if (kind == "RoleBinding" || kind == "ClusterRoleBinding") {
      if (f.number == 2) obj["subjects"].push_back(rbac_reference(f.bytes, true));
      if (f.number == 3) obj["roleRef"] = rbac_reference(f.bytes, false);
    } else if (is_review_kind(kind)) {
      if (f.number == 2) obj["spec"] = review_spec(kind, f.bytes);
    } else {
      known = false;
    }
  });
  if (!known || (kind != "Namespace" && kind != "ConfigMap" && kind != "Secret" && kind != "ServiceAccount" &&
                 kind != "Deployment" && !is_review_kind(kind) && !is_rbac_kind(kind))) {
    *error = "devcluster decodes protobuf only for Namespace, ConfigMap, Secret, ServiceAccount, Role(Binding), "
             "ClusterRole(Binding), access reviews, TokenRequest and the Deployments `kubectl create deployment` "
             "makes, not " + (unknown_field.empty() ? kind : "this " + kind + " (" + unknown_field + ")") +
             "; send JSON instead (e.g. kubectl apply -f or kubectl create -f)";
    return false;
  }
  if (!ok || !valid_utf8(obj.dump(-1, ' ', false, Json::error_handler_t::replace))) {
    *error = "malformed protobuf body for " + kind;
    return false;
  }
  for (const char* key : {"data", "stringData"})
    if (obj.contains(key))
      for (auto& [k, v] : obj[key].items())
        if (!valid_utf8(v.get<std::string>())) {
          *error = "non-UTF-8 string in " + std::string(key);
          return false;
        }
  *out = std::move(obj);
  return true;
}

}  // namespace flotilla::devcluster
