#include "devcluster/nodes_file.h"

#include <set>
#include <yaml-cpp/yaml.h>

#include "devcluster/api_types.h"
#include "kube/yaml_json.h"

namespace flotilla::devcluster {

namespace {

using kube::yaml_to_json;

std::string scalar(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

bool node_spec_from_json(const nlohmann::json& j, NodeSpec* out, std::string* error) {
  if (!j.is_object()) {
    *error = "a node entry must be a mapping with at least `name`";
    return false;
  }
  out->name = j.contains("name") ? scalar(j["name"]) : "";
  if (out->name.empty()) {
    *error = "a node entry has no `name`";
    return false;
  }
  // A misspelt field would otherwise be dropped silently (`gpuCont: 8` → a node without GPUs).
  static const std::set<std::string> known = {"name", "gpuType", "gpuCount", "zone", "cpu", "memory", "labels",
                                              "cudaVisibleDevices"};
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) {
      *error = "node " + out->name + ": unknown field `" + key +
               "` (known: name, gpuType, gpuCount, zone, cpu, memory, labels, cudaVisibleDevices)";
      return false;
    }
  out->gpu_type = j.contains("gpuType") ? scalar(j["gpuType"]) : "";
  if (j.contains("gpuCount")) {
    if (!j["gpuCount"].is_number_integer() || j["gpuCount"].get<long long>() < 0 ||
        j["gpuCount"].get<long long>() > 1000000) {
      *error = "node " + out->name + ": gpuCount must be a non-negative integer";
      return false;
    }
    out->gpu_count = j["gpuCount"].get<int>();
  }
  out->zone = j.contains("zone") ? scalar(j["zone"]) : "";
  if (j.contains("cpu")) out->cpu = scalar(j["cpu"]);
  if (j.contains("memory")) out->memory = scalar(j["memory"]);
  if (j.contains("labels")) {
    if (!j["labels"].is_object()) {
      *error = "node " + out->name + ": labels must be a mapping";
      return false;
    }
    for (auto& [k, v] : j["labels"].items()) out->labels[k] = scalar(v);
  }
  if (j.contains("cudaVisibleDevices")) {
    if (!j["cudaVisibleDevices"].is_boolean()) {
      *error = "node " + out->name + ": cudaVisibleDevices must be true or false";
      return false;
    }
    out->cuda_visible_devices = j["cudaVisibleDevices"].get<bool>();
  }
  return true;
}

bool parse_nodes_yaml(const std::string& text, std::vector<NodeSpec>* out, std::string* error) {
  nlohmann::json doc;
  try {
    doc = yaml_to_json(YAML::Load(text));
  } catch (const std::exception& e) {
    *error = std::string("nodes file is not valid YAML: ") + e.what();
    return false;
  }
  if (doc.is_object() && doc.contains("nodes")) doc = doc["nodes"];
  if (doc.is_null()) doc = nlohmann::json::array();
  if (!doc.is_array()) {
    *error = "nodes file must be a list of nodes or a mapping with `nodes:`";
    return false;
  }
  for (size_t i = 0; i < doc.size(); ++i) {
    NodeSpec spec;
    if (!node_spec_from_json(doc[i], &spec, error)) {
      *error = "nodes[" + std::to_string(i) + "]: " + *error;
      return false;
    }
    for (const auto& other : *out)
      if (other.name == spec.name) {
        *error = "nodes[" + std::to_string(i) + "]: duplicate node name " + spec.name;
        return false;
      }
    out->push_back(std::move(spec));
  }
  return true;
}

nlohmann::json node_object(const NodeSpec& s) {
  nlohmann::json labels = {{"kubernetes.io/hostname", s.name}, {"kubernetes.io/os", "linux"}, {"kubernetes.io/arch", "amd64"},
                           {"type", "virtual-gpu-node"}};
  if (!s.gpu_type.empty()) labels["nvidia.com/gpu.product"] = s.gpu_type;
  labels["nvidia.com/gpu.count"] = std::to_string(s.gpu_count);
  if (!s.zone.empty()) labels["topology.kubernetes.io/zone"] = s.zone;
  for (const auto& [k, v] : s.labels) labels[k] = v;
  nlohmann::json resources = {{"cpu", s.cpu}, {"memory", s.memory}, {"pods", "110"}, {"nvidia.com/gpu", std::to_string(s.gpu_count)}};
  std::string now = now_rfc3339();
  nlohmann::json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", s.name}, {"labels", labels}}},
      {"spec", nlohmann::json::object()},
      {"status",
       {{"capacity", resources},
        {"allocatable", resources},
        {"conditions", nlohmann::json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"},
                                               {"message", "devcluster virtual kubelet is posting ready status"},
                                               {"lastHeartbeatTime", now}, {"lastTransitionTime", now}}})},
        {"addresses", nlohmann::json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                             {{"type", "Hostname"}, {"address", s.name}}})},
        {"nodeInfo", {{"kubeletVersion", "v1.32.0-devcluster"}, {"operatingSystem", "linux"}, {"architecture", "amd64"},
                      {"containerRuntimeVersion", "devcluster://processes"}}}}}};
  if (s.cuda_visible_devices) node["metadata"]["annotations"][kCudaAnnotation] = "true";
  return node;
}

}  // namespace flotilla::devcluster
