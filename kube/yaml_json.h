// YAML text to JSON the way kubectl converts manifests: maps, lists, and plain scalars typed as
// YAML 1.2's core schema reads them (integers, floats, true/false, null); quoted scalars stay
// strings.
//
// Guarantees: yaml_to_json() never throws on a scalar it cannot type (it stays a string);
//   parse_yaml_documents() returns every non-empty document of a multi-document text, or one
//   line with yaml-cpp's position when the text is not YAML.
// Assumes: map keys are scalars.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

namespace flotilla::kube {

nlohmann::json yaml_to_json(const YAML::Node& node);
// false with *error set when the text is not YAML.
bool parse_yaml_documents(const std::string& text, std::vector<nlohmann::json>* documents, std::string* error);

}  // namespace flotilla::kube
