#include "kube/yaml_json.h"

#include <cmath>
#include <cstdlib>

namespace flotilla::kube {
namespace {

nlohmann::json plain_scalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  try {
    std::size_t pos = 0;
    const long long v = std::stoll(s, &pos, 10);
    if (pos == s.size()) return v;
  } catch (...) {
  }
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != nullptr && *end == '\0' && end != s.c_str() && std::isfinite(d) &&
      s.find_first_of("xX") == std::string::npos)
    return d;
  return s;
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& el : n) a.push_back(yaml_to_json(el));
      return a;
    }
    case YAML::NodeType::Scalar:
      return n.Tag() == "!" ? nlohmann::json(n.as<std::string>()) : plain_scalar(n.as<std::string>());
    default: return nullptr;
  }
}

bool parse_yaml_documents(const std::string& text, std::vector<nlohmann::json>* documents, std::string* error) {
  try {
    for (const YAML::Node& doc : YAML::LoadAll(text)) {
      if (!doc || doc.IsNull()) continue;
      documents->push_back(yaml_to_json(doc));
    }
    return true;
  } catch (const YAML::Exception& e) {
    *error = e.what();
    return false;
  }
}

}  // namespace flotilla::kube
