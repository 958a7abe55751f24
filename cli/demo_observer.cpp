#include "cli/demo_observer.h"

#include <cstdio>
#include <optional>

#include "operator/decision_history.h"
#include "operator/job_plan.h"

namespace flotilla::cli {
namespace {

using Json = nlohmann::json;
const kube::Resource kTrainingJobs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};
const Json kNull;

std::string node_state(const Json& node) {
  if (node["spec"].value("unschedulable", false)) return "Cordoned";
  for (const Json& c : node["status"].value("conditions", Json::array()))
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True" ? "Ready" : "NotReady";
  return "Unknown";
}

}  // namespace

std::string format_seconds(double t_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%6.1fs", t_s);
  return buf;
}

DemoObserver::DemoObserver(std::shared_ptr<kube::Client> client)
    : client_(std::move(client)), start_(std::chrono::steady_clock::now()) {}

double DemoObserver::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void DemoObserver::note(const std::string& line) { events_.push_back(format_seconds(now_s()) + " " + line); }

void DemoObserver::poll() {
  const double t = now_s();
  auto jobs = client_->list(kTrainingJobs, "default");
  auto nodes = client_->list(kube::resources::nodes, "");
  if (!jobs || !nodes) {
    last_error_ = !jobs ? jobs.error().message : nodes.error().message;
    return;
  }
  last_error_.clear();
  for (const Json& j : (*jobs).value("items", Json::array())) fold_job(j, t);
  nodes_.clear();
  for (const Json& n : (*nodes).value("items", Json::array())) {
    NodeRecord r;
    r.name = n["metadata"].value("name", "");
    r.gpu_type = n["metadata"].value("labels", Json::object()).value("nvidia.com/gpu.product", "");
    r.gpus = std::atoi(n["status"].value("capacity", Json::object()).value("nvidia.com/gpu", "0").c_str());
    r.state = node_state(n);
    nodes_.push_back(r);
  }
}

void DemoObserver::fold_job(const Json& j, double t) {
  const std::string name = j["metadata"].value("name", "");
  jobs_[name] = j;
  const Json status = j.value("status", Json::object());
  // The plan as the operator wrote it, read by the operator's own reader of status.plan.
  const std::optional<op::JobPlan> plan = op::JobPlan::from_status(status.value("plan", Json::object()));
  const Json progress = status.value("progress", Json::object());
  JobSample s;
  s.t_s = t;
  s.job = name;
  s.phase = status.value("phase", "");
  if (plan) {
    s.plan_summary = plan->summary();
    s.epoch = plan->epoch;
    s.gpus = plan->gpus;
    s.predicted_tokens_per_s = plan->tokens_per_second;
  }
  s.step = progress.value("step", std::int64_t{0});
  s.loss = progress.value("loss", 0.0);
  s.tokens_per_s = progress.value("tokensPerSecond", 0.0);
  samples_.push_back(s);

  if (s.epoch > 0) {
    PlanRecord* record = nullptr;
    for (PlanRecord& p : plans_)
      if (p.job == name && p.epoch == s.epoch) record = &p;
    if (record == nullptr && s.gpus > 0) {
      PlanRecord p;
      p.job = name;
      p.epoch = s.epoch;
      p.summary = s.plan_summary;
      p.gpus = s.gpus;
      p.predicted_tokens_per_s = s.predicted_tokens_per_s;
      for (const op::PlanStage& st : plan->stages)
        p.stages.push_back({st.gpu_type, st.first_block, st.last_block, st.predicted_peak_bytes});
      p.seen_s = t;
      p.seen_unix_ms = std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
      p.step_at_seen = s.step;
      plans_.push_back(p);
      std::string types;
      for (const StageRecord& st : p.stages) types += (types.empty() ? "" : ",") + st.gpu_type;
      note(name + ": plan epoch " + std::to_string(p.epoch) + " " + p.summary + " on " + std::to_string(p.gpus) +
           " GPUs [" + types + "], predicted " + std::to_string(static_cast<int>(p.predicted_tokens_per_s)) +
           " tokens/s");
      record = &plans_.back();
    }
  }

  // Every decision the status still lists, not only the newest: a decision replaced within one
  // poll interval (a preemption, then the next pass's refused scale-up) is still seen.
  for (const op::ScalingDecision& decision : op::recent_decisions(status)) fold_decision(name, decision, t);
}

void DemoObserver::fold_decision(const std::string& name, const op::ScalingDecision& decision, double t) {
  for (const DecisionRecord& r : decisions_)
    if (r.job == name && r.action == decision.action && r.reason == decision.reason && r.epoch == decision.epoch &&
        r.time == decision.time)
      return;
  DecisionRecord d;
  static_cast<op::ScalingDecision&>(d) = decision;
  d.t_s = t;
  d.job = name;
  decisions_.push_back(d);
  note(name + ": " + d.reason);
}

const Json& DemoObserver::job(const std::string& name) const {
  auto it = jobs_.find(name);
  return it == jobs_.end() ? kNull : it->second;
}

std::string DemoObserver::phase(const std::string& name) const {
  const Json& j = job(name);
  return j.is_object() ? j.value("status", Json::object()).value("phase", "") : "";
}

int DemoObserver::gpus(const std::string& name) const {
  const Json& j = job(name);
  return j.is_object() ? j.value("status", Json::object()).value("plan", Json::object()).value("gpus", 0) : 0;
}

std::int64_t DemoObserver::step(const std::string& name) const {
  const Json& j = job(name);
  return j.is_object() ? j.value("status", Json::object()).value("progress", Json::object()).value("step", std::int64_t{0})
                       : 0;
}

std::vector<std::string> DemoObserver::job_names() const {
  std::vector<std::string> out;
  for (const auto& [name, j] : jobs_) out.push_back(name);
  return out;
}

}  // namespace flotilla::cli
