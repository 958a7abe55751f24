#include "cli/demo_report.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/progress_line.h"
#include "common/text_file.h"
#include "process/spawn.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "progress-e3-a0.jsonl" -> 3; -1 for other files.
std::int64_t epoch_of_file(const std::string& name) {
  if (name.rfind("progress-e", 0) != 0) return -1;
  return std::atoll(name.c_str() + 10);
}

std::string mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// The decision that made plan p: the one recorded with p's epoch (status.recentDecisions);
// else the newest seen before the plan (one that fell out of the operator's short history).
// Matching by time alone raced: a preemption shrink was once labelled by a later scale-up.
const DecisionRecord* decision_behind(const DemoObserver& o, const PlanRecord& p) {
  const DecisionRecord* best = nullptr;
  for (const DecisionRecord& d : o.decisions()) {
    if (d.job != p.job || d.action == "keep") continue;
    if (d.epoch == p.epoch) return &d;
    if (d.t_s <= p.seen_s + 0.01) best = &d;
  }
  return best;
}

}  // namespace

std::map<std::int64_t, EpochMeasurement> measure_plans(const std::string& pods_dir, const std::string& job) {
  std::map<std::int64_t, EpochMeasurement> out;
  std::map<std::int64_t, std::vector<double>> tokens;
  std::error_code ec;
  const fs::path root = fs::path(pods_dir) / "default";
  for (const auto& pod : fs::directory_iterator(root, ec)) {
    if (pod.path().filename().string().rfind(job + "-", 0) != 0) continue;
    for (const auto& file : fs::directory_iterator(pod.path(), ec)) {
      const std::int64_t epoch = epoch_of_file(file.path().filename().string());
      if (epoch < 0) continue;
      EpochMeasurement& m = out[epoch];
      m.epoch = epoch;
      std::ifstream in(file.path());
      bool first_of_attempt = true;
      for (std::string line; std::getline(in, line);) {
        const Json j = Json::parse(line, nullptr, false);
        if (!j.is_object()) continue;
        const std::string event = j.value("event", "");
        if (const auto memory = parse_memory_line(line, nullptr)) {
          const int stage = memory->stage;
          m.peak_bytes_by_stage[stage] = std::max(m.peak_bytes_by_stage[stage], memory->peak_bytes);
          m.gpu_type_by_stage[stage] = memory->gpu_type;
        } else if (event == "step" && j.value("rank", -1) == 0) {
          const std::int64_t step = j.value("step", std::int64_t{0});
          const double started_ms = j.value("time_unix_ms", 0.0) - 1000.0 * j.value("step_seconds", 0.0);
          if (m.first_step < 0 || step < m.first_step) m.first_step_start_unix_ms = started_ms;
          m.first_step = m.first_step < 0 ? step : std::min(m.first_step, step);
          m.last_step = std::max(m.last_step, step);
          if (!first_of_attempt) tokens[epoch].push_back(j.value("tokens_per_s", 0.0));
          first_of_attempt = false;
        }
      }
    }
  }
  for (auto& [epoch, m] : out) m.measured_tokens_per_s = median(tokens[epoch]);
  return out;
}

ReferenceRun run_reference(const std::string& worker_binary, const std::string& work_dir, int steps) {
  ReferenceRun r;
  const fs::path dir = fs::path(work_dir) / "reference";
  fs::remove_all(dir);
  fs::create_directories(dir);
  process::SpawnOptions o;
  o.argv = {worker_binary, "run", "--world-size", "1", "--pp", "1", "--dp", "1", "--model", "small",
            "--global-batch", "8", "--micro-batch", "1", "--virtual-shards", "8", "--seed", "1234", "--steps",
            std::to_string(steps), "--data", work_dir + "/data.txt", "--checkpoint-dir", (dir / "ckpt").string(),
            "--checkpoint-every", "0", "--loss-log", (dir / "loss.log").string()};
  o.stdout_path = o.stderr_path = dir / "worker.log";
  try {
    process::Child child = process::spawn(o);
    const auto status = child.wait_for(300s);
    if (!status || !status->ok()) {
      if (!status) child.terminate(2000ms);
      r.error = "the reference run failed: " + read_text(dir / "worker.log");
      return r;
    }
  } catch (const std::exception& e) {
    r.error = std::string("cannot start the reference run: ") + e.what();
    return r;
  }
  r.loss_log = read_text(dir / "loss.log");
  r.ok = true;
  return r;
}

std::vector<std::string> print_report(const ReportInputs& in) {
  const DemoObserver& o = *in.observer;
  const ScenarioResult& sc = *in.scenario;
  std::vector<std::string> failed;
  std::printf("\n== flotilla demo: summary (%.0f s; every GPU number is emulated: examples/local-catalog.yaml)\n",
              in.wall_seconds);

  std::printf("\nScenario:\n");
  for (const ScenarioStep& s : sc.steps) {
    std::printf("  [%s] %s%s%s\n", s.ok ? " ok " : "FAIL", s.name.c_str(), s.detail.empty() ? "" : ": ",
                s.detail.c_str());
    if (!s.ok) failed.push_back(s.name);
  }

  std::printf("\nJobs:\n");
  for (const std::string& name : sc.jobs) {
    const std::string phase = o.phase(name);
    std::printf("  %-10s %-10s step %lld\n", name.c_str(), phase.c_str(), static_cast<long long>(o.step(name)));
    if (phase != "Succeeded") failed.push_back("job " + name + " ended " + (phase.empty() ? "unseen" : phase));
  }

  std::printf("\nPlans of the elastic job (predicted by the planner vs measured on the emulated GPUs; 'resumed': from\n"
              "the first poll that showed the plan to the start of its first step, +-0.3 s):\n");
  std::printf("  %-5s %-16s %-5s %-28s %10s %10s %7s %9s %10s\n", "epoch", "plan", "GPUs", "decision", "pred tok/s",
              "meas tok/s", "ratio", "resumed", "steps lost");
  std::int64_t previous_last = -1;
  for (const PlanRecord& p : o.plans()) {
    if (p.job != "elastic") continue;
    const auto m = in.measured.find(p.epoch);
    const EpochMeasurement* em = m == in.measured.end() ? nullptr : &m->second;
    const DecisionRecord* d = decision_behind(o, p);
    std::string why = d ? d->action : "admit";
    const bool unplanned = d && d->reason.rfind("lost ", 0) == 0;
    if (unplanned) why = "node lost";
    if (d && d->reason.find("gives ") == 0) why = "preempted";
    std::string lost = "-";
    if (em && em->first_step >= 0 && previous_last >= 0) {
      const std::int64_t steps_lost = std::max<std::int64_t>(0, previous_last + 1 - em->first_step);
      lost = std::to_string(steps_lost) + (unplanned ? " (failure)" : "");
      if (!unplanned && steps_lost != 0)
        failed.push_back("planned rescale to epoch " + std::to_string(p.epoch) + " lost " +
                         std::to_string(steps_lost) + " steps");
    }
    if (em && em->last_step >= 0) previous_last = std::max(previous_last, em->last_step);
    char resumed[32] = "-";
    if (p.epoch > 1 && em && em->first_step_start_unix_ms > 0) {
      const double resumed_s = (em->first_step_start_unix_ms - p.seen_unix_ms) / 1000.0;
      // Below the poll interval the poll, not the rescale, is what was measured.
      if (resumed_s < 0.3) std::snprintf(resumed, sizeof resumed, "<0.3 s");
      else std::snprintf(resumed, sizeof resumed, "%.1f s", resumed_s);
    }
    const double measured = em ? em->measured_tokens_per_s : 0;
    char ratio[16] = "-";
    if (measured > 0 && p.predicted_tokens_per_s > 0)
      std::snprintf(ratio, sizeof ratio, "%.2f", measured / p.predicted_tokens_per_s);
    std::printf("  %-5lld %-16s %-5d %-28s %10.0f %10.0f %7s %9s %10s\n", static_cast<long long>(p.epoch),
                p.summary.c_str(), p.gpus, why.substr(0, 28).c_str(), p.predicted_tokens_per_s, measured, ratio,
                resumed, lost.c_str());
  }

  std::printf("\nPeak memory per stage (planner's prediction vs the emulated GPU's high-water mark):\n");
  for (const PlanRecord& p : o.plans()) {
    if (p.job != "elastic") continue;
    const auto m = in.measured.find(p.epoch);
    for (std::size_t s = 0; s < p.stages.size(); ++s) {
      const StageRecord& st = p.stages[s];
      std::int64_t peak = 0;
      if (m != in.measured.end()) {
        auto it = m->second.peak_bytes_by_stage.find(static_cast<int>(s));
        if (it != m->second.peak_bytes_by_stage.end()) peak = it->second;
      }
      char ratio[16] = "-";
      if (peak > 0 && st.predicted_peak_bytes > 0)
        std::snprintf(ratio, sizeof ratio, "%.2f", static_cast<double>(peak) / static_cast<double>(st.predicted_peak_bytes));
      std::printf("  epoch %-3lld stage %zu %-9s units %d-%d  predicted %-9s emulated %-9s ratio %s\n",
                  static_cast<long long>(p.epoch), s, st.gpu_type.c_str(), st.first_block, st.last_block,
                  mib(st.predicted_peak_bytes).c_str(), peak > 0 ? mib(peak).c_str() : "-", ratio);
    }
  }

  std::printf("\nThe brief node (fast-2) while jobs arrived often:\n");
  if (sc.brief.joined_s >= 0 && !sc.brief.decision.job.empty()) {
    const DecisionRecord& d = sc.brief.decision;
    std::printf("  joined at %.1f s, left at %.1f s; the benefit check %s: λ = %.4f/s, S = %.2f, T_overhead = %.1f s,"
                " needs %.1f s idle, P = %.3g %s %.2f\n",
                sc.brief.joined_s, sc.brief.left_s, sc.brief.refused ? "refused" : "passed", d.arrival_rate_per_s,
                d.speedup, d.overhead_s, d.required_idle_s, d.probability, d.probability < d.threshold ? "<" : ">=",
                d.threshold);
    double resume_sum = 0;
    int resumes = 0;
    for (const PlanRecord& p : o.plans()) {
      const auto m = in.measured.find(p.epoch);
      if (p.job == "elastic" && p.epoch > 1 && m != in.measured.end() && m->second.first_step_start_unix_ms > 0)
        // Poll-limited (the plan is seen up to 0.3 s late), so a fast resume can come out negative.
        resume_sum += std::max(0.0, (m->second.first_step_start_unix_ms - p.seen_unix_ms) / 1000.0), ++resumes;
    }
    const double per_restart = resumes ? resume_sum / resumes : d.overhead_s;
    char stopped[96];
    if (per_restart < 0.3)
      std::snprintf(stopped, sizeof stopped, "under 0.3 s of training stopped per restart (the poll's resolution)");
    else
      std::snprintf(stopped, sizeof stopped, "~%.1f s of training stopped (%.1f s per restart, measured here)",
                    2 * per_restart, per_restart);
    if (sc.brief.refused)
      std::printf("  a greedy policy (flotilla up --no-benefit-check) would have restarted twice: onto fast-2, then "
                  "off it when it left,\n  %s plus the steps since the last checkpoint\n  redone when fast-2 left "
                  "under it (up to checkpoint.intervalSteps); Flotilla restarted 0 times and redid 0 steps\n",
                  stopped);
  } else {
    std::printf("  no benefit-check decision was seen\n");
  }

  std::printf("\nLoss:\n");
  if (!in.reference.ok) {
    std::printf("  FAIL: %s\n", in.reference.error.c_str());
    failed.push_back("reference run");
  } else if (in.elastic_loss_log.empty() || in.elastic_loss_log != in.reference.loss_log) {
    const auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
    std::printf("  FAIL: the elastic job's loss log (%ld steps) differs from the uninterrupted reference run (%ld)\n",
                static_cast<long>(lines(in.elastic_loss_log)), static_cast<long>(lines(in.reference.loss_log)));
    failed.push_back("loss log bit-identity");
  } else {
    std::printf("  PASS: %ld steps, the elastic job's loss log equals an uninterrupted one-process run bit for bit\n",
                static_cast<long>(std::count(in.elastic_loss_log.begin(), in.elastic_loss_log.end(), '\n')));
  }
  std::printf("\n%s\n", failed.empty() ? "demo: PASS" : "demo: FAIL");
  for (const std::string& f : failed) std::printf("  failed: %s\n", f.c_str());
  return failed;
}

}  // namespace flotilla::cli
