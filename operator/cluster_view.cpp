#include "operator/cluster_view.h"

#include <cstdlib>

#include "common/pod_plan.h"
#include "kube/clock.h"
#include "kube/object.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

int quantity(const Json& v) {
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) return std::atoi(v.get<std::string>().c_str());
  return 0;
}

// Planned=False with reason InvalidSpec for this generation: the operator could not read the
// job's spec (a spec fixed since has a newer generation).
bool spec_refused(const Json& status, const Json& generation) {
  auto conditions = status.find("conditions");
  if (conditions == status.end() || !conditions->is_array()) return false;
  for (const Json& c : *conditions)
    if (c.is_object() && kube::string_field(c, "type") == "Planned")
      return kube::string_field(c, "status") == "False" && kube::string_field(c, "reason") == "InvalidSpec" &&
             c.value("observedGeneration", Json()) == generation;
  return false;
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

namespace {

// What a live job's pods of its plan's epoch or later hold on the node.
int staying_since(const NodeView& node, const std::string& job, std::int64_t epoch) {
  auto it = node.staying_by_job_epoch.find(job);
  if (it == node.staying_by_job_epoch.end()) return 0;
  int n = 0;
  for (auto e = it->second.lower_bound(epoch); e != it->second.end(); ++e) n += e->second;
  return n;
}

int value_or_zero(const std::map<std::string, int>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

int ClusterView::taken(const NodeView& node) const {
  // Every job with pods or a plan here, once each.
  int n = 0;
  for (const auto& [job, gpus] : node.held_by_job) n += own_share(node, job);
  for (const auto& [job, gpus] : node.planned_by_job)
    if (!node.held_by_job.contains(job)) n += own_share(node, job);
  return n;
}

int ClusterView::own_share(const NodeView& node, const std::string& job) const {
  auto live = planned_jobs.find(job);
  if (live == planned_jobs.end()) return value_or_zero(node.held_by_job, job);
  return std::max(value_or_zero(node.planned_by_job, job), staying_since(node, job, live->second));
}

int ClusterView::free_on(const NodeView& node) const { return std::max(0, node.gpus - taken(node)); }

std::map<std::string, int> ClusterView::free_by_type() const {
  std::map<std::string, int> free;
  for (const NodeView& n : nodes)
    if (n.healthy && !n.gpu_type.empty()) free[n.gpu_type] += free_on(n);
  return free;
}

int ClusterView::free_to(const NodeView& node, const std::string& job) const {
  return node.gpus - taken(node) + own_share(node, job);
}

planner::ClusterSpec ClusterView::snapshot_for(const std::string& job_key, bool exclude_own,
                                               const std::set<std::string>& leave_out) const {
  planner::ClusterSpec spec;
  for (const NodeView& n : nodes) {
    if (!n.healthy || n.gpu_type.empty() || leave_out.contains(n.name)) continue;
    const int free = exclude_own ? n.gpus - taken(n) : free_to(n, job_key);
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

void add_pod_to_view(ClusterView& view, const Json& pod, const std::string& job_label, std::int64_t plan_epoch) {
  const std::string node = pod.value("/spec/nodeName"_json_pointer, std::string());
  if (node.empty() || kube::pod_finished(pod)) return;
  const int gpus = pod_gpus(pod);
  if (gpus == 0) return;
  const Json& meta = pod["metadata"];
  auto labels = meta.find("labels");
  const std::string label = labels != meta.end() && labels->is_object() ? labels->value(job_label, "") : "";
  const std::string job = label.empty() ? "" : meta.value("namespace", "default") + "/" + label;
  auto it = view.index_by_name.find(node);
  if (it == view.index_by_name.end()) return;
  NodeView& n = view.nodes[it->second];
  n.held_by_job[job] += gpus;
  if (auto deleted = meta.find("deletionTimestamp"); deleted == meta.end())
    n.staying_by_job_epoch[job][plan_epoch] += gpus;
  else if (deleted->is_string())
    n.leaving_due = kube::later_rfc3339(n.leaving_due, deleted->get<std::string>());
}

void add_pod_to_view(ClusterView& view, const Json& pod, const std::string& job_label) {
  const Json& meta = pod["metadata"];
  std::int64_t epoch = kUnknownEpoch;
  if (auto annotations = meta.find("annotations"); annotations != meta.end() && annotations->is_object())
    if (auto text = annotations->find(kPlanAnnotation); text != annotations->end() && text->is_string())
      if (auto plan = parse_pod_plan(text->get<std::string>()); std::holds_alternative<PodPlan>(plan))
        epoch = std::get<PodPlan>(plan).epoch;
  add_pod_to_view(view, pod, job_label, epoch);
}

void add_job_plan_to_view(ClusterView& view, const Json& job) {
  const Json& meta = job["metadata"];
  const std::string key = meta.value("namespace", "default") + "/" + kube::string_field(meta, "name");
  static const Json kNone = Json::object();
  auto status_it = job.find("status");
  const Json& status = status_it != job.end() && status_it->is_object() ? *status_it : kNone;
  // A finished job's plan is history, and a job whose spec does not parse is not allocated for
  // (the cluster pass skips it): whatever of their pods still runs is held by the pods.
  if (const std::string phase = kube::string_field(status, "phase"); phase == "Succeeded" || phase == "Failed") return;
  if (spec_refused(status, meta.value("generation", Json()))) return;
  std::int64_t& plan_epoch = view.planned_jobs[key] = 0;  // no plan: its pods count as they stand
  auto plan = status.find("plan");
  if (plan == status.end() || !plan->is_object()) return;
  auto epoch = plan->find("epoch");
  auto pods = plan->find("pods");
  if (epoch == plan->end() || !epoch->is_number_integer() || pods == plan->end() || !pods->is_array()) return;
  plan_epoch = epoch->get<std::int64_t>();
  // Requeued (or started again): the plan of that epoch has no pods, and its reconcile deletes
  // every pod of that epoch or before, so none of them takes a GPU.
  if (pods->empty()) {
    if (plan_epoch < kUnknownEpoch) ++plan_epoch;
    return;
  }
  for (const Json& pod : *pods) {
    if (!pod.is_object()) continue;
    const auto gpus = pod.find("gpus");
    if (gpus == pod.end() || !gpus->is_number_integer() || gpus->get<int>() <= 0) continue;
    if (auto it = view.index_by_name.find(kube::string_field(pod, "node")); it != view.index_by_name.end())
      view.nodes[it->second].planned_by_job[key] += gpus->get<int>();
  }
}

void clear_plans(ClusterView& view) {
  view.planned_jobs.clear();
  for (NodeView& n : view.nodes) n.planned_by_job.clear();
}

ClusterView with_plans_of(const ClusterView& view, const std::vector<Json>& jobs) {
  ClusterView replanned = view;
  clear_plans(replanned);
  for (const Json& job : jobs) add_job_plan_to_view(replanned, job);
  return replanned;
}

ClusterView build_cluster_view(const std::vector<Json>& nodes, const std::vector<Json>& pods,
                               const planner::GpuCatalog& catalog, const std::string& job_label,
                               const std::vector<Json>& jobs) {
  ClusterView view;
  for (const Json& node : nodes) add_node_to_view(view, node, catalog);
  for (const Json& pod : pods) add_pod_to_view(view, pod, job_label);
  for (const Json& job : jobs) add_job_plan_to_view(view, job);
  return view;
}

}  // namespace flotilla::op
