// What `flotilla demo` sees of the local cluster while its scenario plays: one poll lists the
// TrainingJobs and Nodes and folds them into time series (per-job samples), the scaling
// decisions (status.recentDecisions, through the operator's own recent_decisions()) and the
// plans each job ran (status.plan by epoch), with the time each plan was first seen and the time
// training resumed under it.
//
// Guarantees: poll() makes two API calls and never throws (an unreachable API server leaves the
//   records unchanged and sets last_error()); times are seconds since the observer started
//   (steady clock). Every decision the status lists is recorded once (by action, reason, epoch
//   and time), also one the operator replaced between two polls; its t_s is the poll that saw it.
// Assumes: one namespace ("default"); polled every few hundred milliseconds, so times are as
//   exact as the poll interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "operator/decision_history.h"

namespace flotilla::cli {

struct JobSample {
  double t_s = 0;
  std::string job, phase, plan_summary;
  std::int64_t epoch = 0;
  int gpus = 0;
  std::int64_t step = 0;
  double loss = 0;
  double tokens_per_s = 0;
  double predicted_tokens_per_s = 0;
};

// A decision as the status listed it (op::ScalingDecision, the operator's own record), with
// the job and the poll that first saw it.
struct DecisionRecord : op::ScalingDecision {
  double t_s = 0;
  std::string job;
};

struct StageRecord {
  std::string gpu_type;
  int first_block = 0, last_block = 0;
  std::int64_t predicted_peak_bytes = 0;
};

struct PlanRecord {
  std::string job;
  std::int64_t epoch = 0;
  std::string summary;
  int gpus = 0;
  double predicted_tokens_per_s = 0;
  std::vector<StageRecord> stages;
  double seen_s = 0;            // first poll that showed this epoch
  double seen_unix_ms = 0;      // the same moment on the wall clock (the workers' progress lines use it)
  std::int64_t step_at_seen = 0;
};

struct NodeRecord {
  std::string name, gpu_type, state;  // state: Ready, NotReady, Cordoned
  int gpus = 0;
};

class DemoObserver {
 public:
  explicit DemoObserver(std::shared_ptr<kube::Client> client);
  void poll();
  double now_s() const;
  const std::string& last_error() const { return last_error_; }

  // The job's latest object (null JSON when never seen).
  const nlohmann::json& job(const std::string& name) const;
  std::string phase(const std::string& name) const;
  int gpus(const std::string& name) const;
  std::int64_t step(const std::string& name) const;
  std::vector<std::string> job_names() const;

  const std::vector<JobSample>& samples() const { return samples_; }
  const std::vector<DecisionRecord>& decisions() const { return decisions_; }
  const std::vector<PlanRecord>& plans() const { return plans_; }
  const std::vector<NodeRecord>& nodes() const { return nodes_; }
  // One line per scaling event ("  42.1s elastic: scale-up 2 -> 4 GPUs ..."), oldest first.
  const std::vector<std::string>& events() const { return events_; }
  void note(const std::string& line);  // the scenario's own narration, in the same log

 private:
  void fold_job(const nlohmann::json& job, double t);
  void fold_decision(const std::string& job, const op::ScalingDecision& decision, double t);

  std::shared_ptr<kube::Client> client_;
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, nlohmann::json> jobs_;
  std::vector<JobSample> samples_;
  std::vector<DecisionRecord> decisions_;
  std::vector<PlanRecord> plans_;
  std::vector<NodeRecord> nodes_;
  std::vector<std::string> events_;
  std::string last_error_;
};

std::string format_seconds(double t_s);  // "  42.1s"

}  // namespace flotilla::cli
