#include "operator/cluster_view.h"

#include <cstdlib>

#include "kube/object.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

int quantity(const Json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) return std::atoi(v.get<std::string>().c_str());
  return 0;
}

bool node_healthy(const Json& node) {
  if (node["metadata"].contains("deletionTimestamp")) return false;
  if (node.value("/spec/unschedulable"_json_pointer, false)) return false;
  for (const Json& c : node.value("/status/conditions"_json_pointer, Json::array()))
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  return false;
}

}  // namespace

int NodeView::held() const {
  int n = 0;
  for (const auto& [job, gpus] : held_by_job) n += gpus;
  return n;
}

const NodeView* ClusterView::find(const std::string& name) const {
  if (auto it = index_by_name.find(name);
      it != index_by_name.end() && it->second < nodes.size() && nodes[it->second].name == name)
    return &nodes[it->second];
  for (const NodeView& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

std::map<std::string, int> ClusterView::free_by_type() const {
  std::map<std::string, int> free;
  for (const NodeView& n : nodes)
    if (n.healthy && !n.gpu_type.empty()) free[n.gpu_type] += std::max(0, n.gpus - n.held());
  return free;
}

planner::ClusterSpec ClusterView::snapshot_for(const std::string& job_key, bool exclude_own,
                                               const std::set<std::string>& leave_out) const {
  planner::ClusterSpec spec;
  for (const NodeView& n : nodes) {
    if (!n.healthy || n.gpu_type.empty() || leave_out.contains(n.name)) continue;
    int free = n.gpus - n.held();
    if (!exclude_own)
      if (auto it = n.held_by_job.find(job_key); it != n.held_by_job.end()) free += it->second;
    if (free <= 0) continue;
    spec.nodes.push_back({n.name, n.gpu_type, free, n.zone, n.zone});
  }
  return spec;
}

int pod_gpus(const Json& pod) {
  int total = 0;
  for (const Json& v : kube::pod_gpu_quantities(pod)) total += quantity(v);
  return total;
}

void add_node_to_view(ClusterView& view, const Json& node, const planner::GpuCatalog& catalog) {
  static const Json kNoLabels = Json::object();
  const Json& meta = node["metadata"];
  NodeView n;
  n.name = meta.value("name", "");
  auto labels_it = meta.find("labels");
  const Json& labels = labels_it != meta.end() && labels_it->is_object() ? *labels_it : kNoLabels;
  const std::string product = labels.value("nvidia.com/gpu.product", "");
  if (const planner::GpuType* t = catalog.find(product); t != nullptr && !product.empty()) n.gpu_type = t->name;
  n.zone = labels.value("topology.kubernetes.io/zone", "default");
  n.gpus = quantity(node.value("/status/allocatable"_json_pointer, Json::object()).value("nvidia.com/gpu", Json("0")));
  n.healthy = node_healthy(node);
  view.index_by_name.emplace(n.name, view.nodes.size());
  view.nodes.push_back(std::move(n));
}

void add_pod_to_view(ClusterView& view, const Json& pod, const std::string& job_label) {
  const std::string node = pod.value("/spec/nodeName"_json_pointer, std::string());
  if (node.empty() || kube::pod_finished(pod)) return;
  const int gpus = pod_gpus(pod);
  if (gpus == 0) return;
  const Json& meta = pod["metadata"];
  auto labels = meta.find("labels");
  const std::string label = labels != meta.end() && labels->is_object() ? labels->value(job_label, "") : "";
  const std::string job = label.empty() ? "" : meta.value("namespace", "default") + "/" + label;
  if (auto it = view.index_by_name.find(node); it != view.index_by_name.end())
    view.nodes[it->second].held_by_job[job] += gpus;
}

ClusterView build_cluster_view(const std::vector<Json>& nodes, const std::vector<Json>& pods,
                               const planner::GpuCatalog& catalog, const std::string& job_label) {
  ClusterView view;
  for (const Json& node : nodes) add_node_to_view(view, node, catalog);
  for (const Json& pod : pods) add_pod_to_view(view, pod, job_label);
  return view;
}

}  // namespace flotilla::op
