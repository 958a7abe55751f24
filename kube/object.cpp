#include "kube/object.h"

namespace flotilla::kube {

static std::string meta_string(const Json& obj, const char* field) {
  if (!obj.is_object()) return {};
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return {};
  auto f = m->find(field);
  if (f == m->end() || !f->is_string()) return {};
  return f->get<std::string>();
}

std::string object_name(const Json& obj) { return meta_string(obj, "name"); }
std::string object_namespace(const Json& obj) { return meta_string(obj, "namespace"); }
std::string object_resource_version(const Json& obj) { return meta_string(obj, "resourceVersion"); }
std::string object_uid(const Json& obj) { return meta_string(obj, "uid"); }

std::string make_key(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string object_key(const Json& obj) { return make_key(object_namespace(obj), object_name(obj)); }

}  // namespace flotilla::kube
