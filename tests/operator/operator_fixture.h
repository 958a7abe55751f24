// Shared fixture of the operator's pure tests: an emulated slow GPU type (0.001 TFLOP/s, so the
// small reference model gains from pipelining), nodes of it, and a TrainingJob object.
#pragma once

#include <nlohmann/json.hpp>

#include "operator/cluster_view.h"
#include "operator/job_spec.h"
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/network.h"
#include "planner/profile.h"

namespace flotilla::op::testing {

inline const char* kSlowCatalog = R"(gpus:
  emu-slow: {memory_gb: 16, peak_bf16_tflops: 0.001, compute_efficiency: 1, mem_bandwidth_bytes_per_s: 1e11,
             gpus_per_node: 2, intra_node_bandwidth_bytes_per_s: 1e11, inter_node_bandwidth_bytes_per_s: 1e10,
             usd_per_hour: 1}
)";

struct World {
  planner::GpuCatalog catalog = planner::apply_catalog_override(planner::builtin_gpu_catalog(), kSlowCatalog).value();
  planner::ComputeModel compute{nullptr};
  planner::NetworkModel network = planner::default_network_model();
  planner::EvalContext context() const {
    planner::EvalContext c;
    c.catalog = &catalog;
    c.compute = &compute;
    c.network = &network;
    return c;
  }
};

inline NodeView node(std::string name, int gpus, bool healthy = true) {
  NodeView n;
  n.name = std::move(name);
  n.gpu_type = "emu-slow";
  n.zone = "z";
  n.gpus = gpus;
  n.healthy = healthy;
  return n;
}

inline nlohmann::json job_object(const std::string& extra_spec = "") {
  nlohmann::json j = nlohmann::json::parse(R"({
    "apiVersion": "flotilla.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "demo", "namespace": "team", "uid": "u-1", "generation": 1,
                 "creationTimestamp": "2026-11-24T00:00:00Z"},
    "spec": {"model": "small", "globalBatchSize": 8, "trainSteps": 100,
             "worker": {"kind": "flotilla", "image": "w:1", "data": "/data/t.txt"},
             "checkpoint": {"path": "/ckpt", "intervalSteps": 10},
             "elasticity": {"mode": "strict", "minRescaleIntervalSeconds": 0}}})");
  if (!extra_spec.empty()) j["spec"].merge_patch(nlohmann::json::parse(extra_spec));
  return j;
}

inline JobSpec spec_of(const nlohmann::json& job) { return std::get<JobSpec>(parse_job_spec(job)); }

}  // namespace flotilla::op::testing
