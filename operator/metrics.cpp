#include "operator/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace flotilla::op {
namespace {

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string label_text(const Labels& labels, const std::string& extra_key = "", const std::string& extra_value = "") {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=\"" + escape(v) + "\"";
  if (!extra_key.empty()) out += (out.empty() ? "" : ",") + extra_key + "=\"" + extra_value + "\"";
  return out.empty() ? "" : "{" + out + "}";
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest text that reads back as v: le="0.005", not le="0.0050000000000000001".
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

const std::vector<double> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
const std::vector<double> kRescaleBuckets = {0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300};

}  // namespace

Metrics::Metrics() {
  define("flotilla_scaling_decisions_total", "counter", "Scaling decisions taken, by direction and reason.");
  define("flotilla_rescale_duration_seconds", "histogram",
         "Time of each rescale phase: drain (new epoch to barrier lifted), restart (barrier lifted to Running), "
         "total.",
         kRescaleBuckets);
  define("flotilla_rescaling_oldest_seconds", "gauge", "Age of the oldest rescale in progress (0: none).");
  define("flotilla_memory_prediction_error_ratio", "gauge",
         "Largest |predicted - measured| / measured peak memory over running pods that report a measured peak.");
  define("flotilla_preemptions_total", "counter", "GPUs reclaimed from elastic jobs for waiting jobs.");
  define("flotilla_worker_out_of_memory_total", "counter",
         "Plans whose workers ran out of GPU memory (each re-planned with the headroom it taught).");
  define("flotilla_pod_start_timeouts_total", "counter",
         "Plans re-planned without the nodes of pods that did not start in spec.elasticity.podStartTimeoutSeconds.");
  define("flotilla_jobs", "gauge", "TrainingJobs by phase.");
  define("flotilla_gpus", "gauge", "GPUs by type and state (allocated, free, unhealthy).");
  define("flotilla_reconcile_total", "counter", "Reconciles, by kind (job, cluster) and result.");
  define("flotilla_reconcile_duration_seconds", "histogram", "Reconcile time, by kind.", kLatencyBuckets);
  define("flotilla_queue_depth", "gauge", "TrainingJobs waiting for GPUs.");
  define("flotilla_leader", "gauge", "1 while this operator leads, else 0.");
  define("flotilla_api_errors_total", "counter",
         "Requests the API server refused or that failed, by kind (Forbidden: a missing RBAC rule).");
  define("flotilla_benefit_checks_total", "counter", "Poisson benefit checks, by result (pass, refuse).");
  define("flotilla_predicted_tokens_per_second", "gauge", "Predicted tokens/s of the running plans, summed.");
  define("flotilla_measured_tokens_per_second", "gauge", "Measured tokens/s of the running jobs, summed.");
  for (const char* direction : {"up", "down", "admit", "requeue"})
    inc("flotilla_scaling_decisions_total", {{"direction", direction}, {"reason", "none"}}, 0);
  inc("flotilla_preemptions_total", {}, 0);
  inc("flotilla_worker_out_of_memory_total", {}, 0);
  inc("flotilla_pod_start_timeouts_total", {}, 0);
  for (const char* result : {"pass", "refuse"}) inc("flotilla_benefit_checks_total", {{"result", result}}, 0);
  for (const char* kind : {"job", "cluster"})
    for (const char* result : {"ok", "error"}) inc("flotilla_reconcile_total", {{"kind", kind}, {"result", result}}, 0);
  for (const char* p : {"Pending", "Running", "Rescaling", "Succeeded", "Failed"})
    set("flotilla_jobs", {{"phase", p}}, 0);
  for (const char* kind : {"Forbidden", "Unauthorized", "NotFound", "Conflict", "Invalid", "Transient", "Other"})
    inc("flotilla_api_errors_total", {{"kind", kind}}, 0);
  set("flotilla_queue_depth", {}, 0);
  set("flotilla_rescaling_oldest_seconds", {}, 0);
  set("flotilla_leader", {}, 0);
  for (const char* phase : {"drain", "restart", "total"})
    precreate_histogram("flotilla_rescale_duration_seconds", {{"phase", phase}});
  for (const char* kind : {"job", "cluster"}) precreate_histogram("flotilla_reconcile_duration_seconds", {{"kind", kind}});
  set("flotilla_predicted_tokens_per_second", {}, 0);
  set("flotilla_measured_tokens_per_second", {}, 0);
}

void Metrics::define(const std::string& name, const std::string& type, const std::string& help,
                     std::vector<double> buckets) {
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
}

void Metrics::inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  families_[name].values[labels] += by;
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  families_[name].values[labels] = value;
}

void Metrics::precreate_histogram(const std::string& name, const Labels& labels) {
  Family& f = families_[name];
  f.bucket_counts[labels].resize(f.buckets.size(), 0);
  f.sums[labels] += 0;
  f.counts[labels] += 0;
}

void Metrics::observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  Family& f = families_[name];
  std::vector<double>& counts = f.bucket_counts[labels];
  counts.resize(f.buckets.size(), 0);
  for (std::size_t i = 0; i < f.buckets.size(); ++i)
    if (value <= f.buckets[i]) counts[i] += 1;
  f.sums[labels] += value;
  f.counts[labels] += 1;
}

void Metrics::replace_family(const std::string& name, const std::map<Labels, double>& series) {
  std::lock_guard lock(mutex_);
  Family& f = families_[name];
  for (auto& [labels, v] : f.values) v = 0;  // keep pre-created series at 0
  for (const auto& [labels, v] : series) f.values[labels] = v;
}

double Metrics::value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  auto f = families_.find(name);
  if (f == families_.end()) return 0;
  auto v = f->second.values.find(labels);
  return v == f->second.values.end() ? 0 : v->second;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    if (f.type != "histogram") {
      for (const auto& [labels, v] : f.values) out += name + label_text(labels) + " " + number(v) + "\n";
      continue;
    }
    for (const auto& [labels, counts] : f.bucket_counts) {
      for (std::size_t i = 0; i < f.buckets.size(); ++i)
        out += name + "_bucket" + label_text(labels, "le", number(f.buckets[i])) + " " + number(counts[i]) + "\n";
      out += name + "_bucket" + label_text(labels, "le", "+Inf") + " " + number(f.counts.at(labels)) + "\n";
      out += name + "_sum" + label_text(labels) + " " + number(f.sums.at(labels)) + "\n";
      out += name + "_count" + label_text(labels) + " " + number(f.counts.at(labels)) + "\n";
    }
  }
  return out;
}

}  // namespace flotilla::op
