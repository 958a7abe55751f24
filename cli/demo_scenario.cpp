#include "cli/demo_scenario.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "kube/yaml_json.h"

namespace flotilla::cli {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
const kube::Resource kTrainingJobs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The first decision about `job` recorded at or after index `since` that `pred` accepts; null
// when none has been seen yet. The scenario's waits read the observer's growing list with it.
const DecisionRecord* first_decision_since(const DemoObserver& observer, std::size_t since, const std::string& job,
                                           const std::function<bool(const DecisionRecord&)>& pred) {
  const std::vector<DecisionRecord>& decisions = observer.decisions();
  for (std::size_t i = since; i < decisions.size(); ++i)
    if (decisions[i].job == job && pred(decisions[i])) return &decisions[i];
  return nullptr;
}

class Script {
 public:
  Script(kube::Client& client, DemoObserver& observer, const ScenarioOptions& o, const std::function<void()>& tick,
         ScenarioResult& result)
      : client_(client), observer_(observer), o_(o), tick_(tick), result_(result) {}

  // Polls until pred() holds or the limit runs out; records the step either way.
  bool wait(const std::string& step, const std::function<bool()>& pred, std::chrono::seconds limit,
            const std::string& job_for_detail) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      observer_.poll();
      tick_();
      if (pred()) {
        result_.steps.push_back({step, true, ""});
        return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(300ms);
    }
    const Json& j = observer_.job(job_for_detail);
    const std::string status = j.is_object() ? j.value("status", Json::object()).dump() : "never seen";
    result_.steps.push_back({step, false, "not within " + std::to_string(limit.count()) + " s; " + job_for_detail +
                                              " status: " + status.substr(0, 600)});
    observer_.note("FAILED: " + step + " (not within " + std::to_string(limit.count()) + " s)");
    return false;
  }
  void pause(std::chrono::milliseconds how_long) {
    const auto until = std::chrono::steady_clock::now() + how_long;
    while (std::chrono::steady_clock::now() < until) {
      observer_.poll();
      tick_();
      std::this_thread::sleep_for(300ms);
    }
  }
  bool apply(const std::string& file, const std::string& name, int steps) {
    std::ifstream in(o_.examples_dir + "/" + file);
    std::stringstream text;
    text << in.rdbuf();
    std::string yaml = replace_all(replace_all(replace_all(text.str(), "${DIR}", o_.work_dir), "${NAME}", name),
                                   "${STEPS}", std::to_string(steps));
    std::vector<Json> docs;
    std::string error;
    if (!in || !kube::parse_yaml_documents(yaml, &docs, &error) || docs.empty())
      return record_failure("apply " + name, "cannot read " + o_.examples_dir + "/" + file + ": " + error);
    std::ofstream(o_.work_dir + "/" + name + ".yaml") << yaml;  // what was applied, for the curious
    auto created = client_.create(kTrainingJobs, "default", docs.front());
    if (!created) return record_failure("apply " + name, created.error().message);
    result_.jobs.push_back(name);
    observer_.note("applied TrainingJob " + name + " (" + file + ", " + std::to_string(steps) + " steps)");
    return true;
  }
  bool admin(const std::string& what, const std::string& method, const std::string& path, const Json& body) {
    auto r = client_.request(method, path, body.is_null() ? "{}" : body.dump());
    if (!r) return record_failure(what, r.error().message);
    observer_.note(what);
    return true;
  }
  bool record_failure(const std::string& step, const std::string& why) {
    result_.steps.push_back({step, false, why});
    observer_.note("FAILED: " + step + ": " + why);
    return false;
  }

 private:
  kube::Client& client_;
  DemoObserver& observer_;
  const ScenarioOptions& o_;
  const std::function<void()>& tick_;
  ScenarioResult& result_;
};

Json node_body(const std::string& name, const std::string& type, int gpus) {
  return {{"name", name}, {"gpuType", type}, {"gpuCount", gpus}, {"zone", "z"}};
}

}  // namespace

bool ScenarioResult::ok() const {
  for (const ScenarioStep& s : steps)
    if (!s.ok) return false;
  return !steps.empty();
}

ScenarioResult run_scenario(kube::Client& client, DemoObserver& observer, const ScenarioOptions& o,
                            const std::function<void()>& tick) {
  ScenarioResult r;
  Script s(client, observer, o, tick, r);
  // Steps between the moves; the elastic job runs through all of them.
  const int gap = o.quick ? 25 : 60;
  // Enough steps that, after the urgent job, growing back still repays the restart here.
  r.elastic_steps = o.quick ? 500 : 900;
  r.urgent_steps = o.quick ? 20 : 100;
  r.burst_steps = 20;
  const std::string e = "elastic";
  auto elastic_at = [&](int gpus) {
    return [&observer, e, gpus] { return observer.gpus(e) == gpus && observer.phase(e) == "Running"; };
  };
  auto past = [&observer, e](std::int64_t step) { return [&observer, e, step] { return observer.step(e) >= step; }; };

  // 1. Admission at 2 GPUs, then growth through the benefit check while nobody waits.
  if (!s.apply("elastic.yaml", e, r.elastic_steps)) return r;
  s.wait("elastic job admitted and grown to 4 GPUs", elastic_at(4), 120s, e);
  s.wait("elastic job trains on 4 GPUs", past(observer.step(e) + gap), 120s, e);

  // 2. A fast node fails: the job shrinks pipeline-first onto what is left.
  s.admin("node fast-1 (emu-fast x2) fails at step " + std::to_string(observer.step(e)), "POST",
          "/admin/nodes/fast-1/fail", Json());
  s.wait("PP-first shrink onto fast-0 after fast-1 failed", elastic_at(2), 90s, e);
  s.wait("elastic job trains on 2 GPUs", past(observer.step(e) + gap / 2), 120s, e);

  // 3. Slower GPUs join: the benefit check passes, the plan goes heterogeneous.
  s.admin("node slow-0 (emu-slow x2) joins", "POST", "/admin/nodes", node_body("slow-0", "emu-slow", 2));
  s.wait("scale-up onto fast-0 + slow-0 through the benefit check", elastic_at(4), 90s, e);
  s.wait("elastic job trains on the mixed plan", past(observer.step(e) + gap), 120s, e);

  // 4. Jobs arrive often; a node joins only briefly: the benefit check refuses it.
  for (int i = 1; i <= 4; ++i) {
    const std::string name = "burst-" + std::to_string(i);
    s.apply("burst.yaml", name, r.burst_steps);
    s.wait(name + " admitted", [&observer, name] {
      const std::string p = observer.phase(name);
      return p == "Running" || p == "Succeeded";
    }, 60s, name);
  }
  const std::size_t decisions_before = observer.decisions().size();
  r.brief.joined_s = observer.now_s();
  s.admin("node fast-2 (emu-fast x2) joins briefly", "POST", "/admin/nodes", node_body("fast-2", "emu-fast", 2));
  s.wait(
      "the elastic job's benefit check answers on fast-2",
      [&] {
        const DecisionRecord* d =
            first_decision_since(observer, decisions_before, e, [](const DecisionRecord& x) { return x.has_benefit; });
        if (d == nullptr) return false;
        r.brief.decision = *d;
        r.brief.refused = d->action != "scale-up" && d->probability < d->threshold;  // the Poisson check's answer
        return true;
      },
      30s, e);
  if (!r.brief.refused)
    r.steps.push_back({"the benefit check refuses the brief node while jobs arrive often", false,
                       "it scaled up: " + r.brief.decision.reason});
  s.pause(4000ms);
  s.admin("node fast-2 leaves", "DELETE", "/admin/nodes/fast-2", Json());
  r.brief.left_s = observer.now_s();
  s.wait("elastic job keeps training on 4 GPUs", past(observer.step(e) + gap / 2), 120s, e);

  // 5. A job of higher priority arrives: the elastic job's extra GPUs are reclaimed for it.
  const std::size_t decisions_before_urgent = observer.decisions().size();
  s.apply("urgent.yaml", "urgent", r.urgent_steps);
  s.wait("urgent job admitted on GPUs reclaimed from the elastic job",
         [&observer] { return observer.phase("urgent") == "Running" && observer.gpus("elastic") == 2; }, 90s, "urgent");

  // 6. It finishes; the elastic job grows back and runs to the end.
  s.wait("urgent job succeeded", [&observer] { return observer.phase("urgent") == "Succeeded"; }, 180s, "urgent");
  // It grows back, unless it has too little training left for the restart to repay itself:
  // the allocator then says so (EndsBeforeRestartRepays), which a fast machine may reach.
  const auto grown_back = elastic_at(4);
  s.wait(
      "elastic job grown back to 4 GPUs, or kept because it ends before a restart repays itself",
      [&] {
        if (grown_back()) return true;
        return first_decision_since(observer, decisions_before_urgent, e, [](const DecisionRecord& x) {
                 return x.reason.find("ends before the restart repays itself") != std::string::npos;
               }) != nullptr;
      },
      120s, e);
  s.wait("elastic job succeeded", [&observer, e] { return observer.phase(e) == "Succeeded"; }, 600s, e);
  for (const std::string& name : r.jobs)
    if (name != e)
      s.wait(name + " succeeded", [&observer, name] { return observer.phase(name) == "Succeeded"; }, 60s, name);
  return r;
}

}  // namespace flotilla::cli
