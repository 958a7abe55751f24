#include "kube/object.h"

namespace flotilla::kube {

std::string string_field(const Json& object, const char* key) {
  if (!object.is_object()) return {};
  auto f = object.find(key);
  if (f == object.end() || !f->is_string()) return {};
  return f->get<std::string>();
}

static std::string meta_string(const Json& obj, const char* field) {
  if (!obj.is_object()) return {};
  auto m = obj.find("metadata");
  return m == obj.end() ? std::string() : string_field(*m, field);
}

std::string object_name(const Json& obj) { return meta_string(obj, "name"); }
std::string object_namespace(const Json& obj) { return meta_string(obj, "namespace"); }
std::string object_resource_version(const Json& obj) { return meta_string(obj, "resourceVersion"); }
std::string object_uid(const Json& obj) { return meta_string(obj, "uid"); }

std::string make_key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string object_key(const Json& obj) { return make_key(object_namespace(obj), object_name(obj)); }

std::vector<Json> pod_gpu_quantities(const Json& pod) {
  std::vector<Json> quantities;
  for (const Json& c : pod.value("/spec/containers"_json_pointer, Json::array())) {
    const Json res = c.value("resources", Json::object());
    Json v = res.value("limits", Json::object()).value("nvidia.com/gpu", Json());
    if (v.is_null()) v = res.value("requests", Json::object()).value("nvidia.com/gpu", Json());
    quantities.push_back(std::move(v));
  }
  return quantities;
}

bool pod_finished(const Json& pod) {
  const std::string phase = pod.value("/status/phase"_json_pointer, std::string());
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace flotilla::kube
