// Virtual GPU nodes: the nodes.yaml format and the Node objects built from it.
//
// nodes.yaml is either a list or {nodes: [...]}; each entry:
//   name: gpu-a100-0          (required, DNS subdomain)
//   gpuType: A100-80GB        → label nvidia.com/gpu.product
//   gpuCount: 8               → allocatable/capacity nvidia.com/gpu, label nvidia.com/gpu.count
//   zone: zone-a              → label topology.kubernetes.io/zone
//   cpu: "64", memory: 512Gi  (optional capacity; defaults 32 / 256Gi)
//   labels: {k: v}            (extra labels)
//   cudaVisibleDevices: true  (also export CUDA_VISIBLE_DEVICES to pods; default false)
// Guarantees: parse errors name the entry and field (an unknown field is an error, so a typo
//   cannot silently drop a setting); node_object() depends only on the spec, except the
//   Ready condition's timestamps (now).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flotilla::devcluster {

struct NodeSpec {
  std::string name;
  std::string gpu_type;
  int gpu_count = 0;
  std::string zone;
  std::string cpu = "32";
  std::string memory = "256Gi";
  std::map<std::string, std::string> labels;
  bool cuda_visible_devices = false;
};

bool parse_nodes_yaml(const std::string& text, std::vector<NodeSpec>* out, std::string* error);
bool node_spec_from_json(const nlohmann::json& j, NodeSpec* out, std::string* error);
// A v1 Node (without uid/resourceVersion) for the spec, Ready.
nlohmann::json node_object(const NodeSpec& spec);

constexpr const char* kFailedAnnotation = "devcluster.flotilla.io/failed";
constexpr const char* kGpusAnnotation = "devcluster.flotilla.io/gpus";
constexpr const char* kCudaAnnotation = "devcluster.flotilla.io/cuda-visible-devices";

}  // namespace flotilla::devcluster
