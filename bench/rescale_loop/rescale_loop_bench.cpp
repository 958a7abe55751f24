// bench_rescale_loop: how long the sidecar's planned rescale takes on devcluster, from the
// moment the operator patches a new epoch into the pod's plan to the first step completed
// under it, split into parts (wall-clock timestamps from the sidecar's sidecar-events.jsonl
// and the workers' progress lines):
//   stop        patch seen, SIGTERM, the step in flight finishes (minus the checkpoint)
//   checkpoint  the coordinated checkpoint write (rank 0's write_seconds)
//   barrier     workers exited -> Stopped reported -> the operator (this bench, polling every
//               20 ms) lifts the barrier -> the sidecar sees it
//   spawn       rendezvous published, ranks forked and exec'd, stages built and loaded
//   rendezvous  the new ranks' TCP rendezvous (max connect_seconds)
//   first step  the first step under the new layout
// Baseline, measured in the same run: a cold start of the same new layout as a fresh pod
// (pod created -> first step), resuming from the same checkpoint. Goal: total < 5 s.
// Usage: bench_rescale_loop [--trials 3]
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "process/poll_until.h"
#include "common/pod_plan.h"
#include "kube/client.h"
#include "kube/config.h"
#include "tests/common/sample_pod_plan.h"
#include "tests/devcluster/devcluster_process.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using flotilla::PodPlan;
using flotilla::PodState;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<json> read_lines(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(j);
  }
  return out;
}

template <class F>
bool wait_for(F pred, std::chrono::seconds limit = 60s) {
  return flotilla::process::poll_until(pred, limit);
}

struct Bench {
  devcluster_test::DevclusterProcess dc{"bench-rescale-loop"};
  std::shared_ptr<flotilla::kube::Client> client;
  fs::path dir;
  fs::path corpus;

  PodPlan plan(int pp, std::int64_t epoch, const fs::path& ck) const {
    PodPlan p = flotilla::testing::small_pipeline_plan("default/bench", pp, epoch, 1000000, corpus.string(), ck.string());
    for (int r = 0; r < pp; ++r) p.ranks.push_back(r);
    p.rendezvous_pod = "";
    return p;
  }

  void create_pod(const std::string& name, PodPlan p) {
    p.rendezvous_pod = name;
    json command = {std::string(FLOTILLA_BINARY_DIR) + "/trainer-sidecar/flotilla-sidecar", "--kubeconfig",
                    dc.kubeconfig().string(), "--worker-binary",
                    std::string(FLOTILLA_BINARY_DIR) + "/worker/flotilla-worker", "--work-dir",
                    (dir / ("work-" + name)).string(), "--report-interval-ms", "200"};
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"},
                {"metadata", {{"name", name}, {"annotations", {{flotilla::kPlanAnnotation, encode_pod_plan(p)}}}}},
                {"spec", {{"restartPolicy", "Never"},
                          {"containers", json::array({{{"name", "sidecar"}, {"image", "flotilla"}, {"command", command}}})}}}};
    auto r = client->create(flotilla::kube::resources::pods, "default", pod);
    if (!r.ok()) throw std::runtime_error(r.error().describe());
  }

  void patch_plan(const std::string& name, PodPlan p) {
    p.rendezvous_pod = name;
    json patch = {{"metadata", {{"annotations", {{flotilla::kPlanAnnotation, encode_pod_plan(p)}}}}}};
    auto r = client->patch(flotilla::kube::resources::pods, "default", name, flotilla::kube::PatchType::Merge, patch);
    if (!r.ok()) throw std::runtime_error(r.error().describe());
  }

  std::optional<flotilla::PodReport> report(const std::string& name) {
    auto r = client->get(flotilla::kube::resources::pods, "default", name);
    if (!r.ok()) return std::nullopt;
    auto text = r->value("/metadata/annotations"_json_pointer, json::object()).value(flotilla::kReportAnnotation, std::string());
    auto parsed = flotilla::parse_pod_report(text);
    if (auto* rep = std::get_if<flotilla::PodReport>(&parsed)) return *rep;
    return std::nullopt;
  }

  // The sidecar event `name` of `epoch` (first occurrence), or -1.
  double sidecar_event(const std::string& pod, const std::string& name, std::int64_t epoch) {
    for (auto& j : read_lines(dir / ("work-" + pod) / "sidecar-events.jsonl"))
      if (j.value("event", "") == name && j.value("epoch", 0) == epoch) return j["time_unix_ms"].get<double>();
    return -1;
  }
};

struct Parts {
  double stop = 0, checkpoint = 0, barrier = 0, spawn = 0, rendezvous = 0, first_step = 0, total = 0;
};

// Parts of the start under `epoch` in `pod` (from barrier_lifted to the first step).
bool start_parts(Bench& b, const std::string& pod, std::int64_t epoch, Parts& p, double* first_step_ms) {
  const fs::path progress = b.dir / ("work-" + pod) / ("progress-e" + std::to_string(epoch) + "-a1.jsonl");
  double starts_ms = 0, connect_s = 0, step_ms = -1;
  std::int64_t first = -1;
  for (auto& j : read_lines(progress)) {
    const std::string ev = j.value("event", "");
    if (ev == "start") {
      starts_ms = std::max(starts_ms, j["time_unix_ms"].get<double>());
      connect_s = std::max(connect_s, j["connect_seconds"].get<double>());
    } else if (ev == "step") {
      const std::int64_t s = j["step"].get<std::int64_t>();
      if (first < 0) first = s;
      if (s == first) step_ms = std::max(step_ms, j["time_unix_ms"].get<double>());
    }
  }
  const double lifted = b.sidecar_event(pod, "barrier_lifted", epoch);
  if (step_ms < 0 || lifted < 0) return false;
  p.rendezvous = connect_s * 1000;
  p.spawn = starts_ms - lifted - p.rendezvous;
  p.first_step = step_ms - starts_ms;
  *first_step_ms = step_ms;
  return true;
}

double checkpoint_write_ms(Bench& b, const std::string& pod, std::int64_t epoch) {
  const fs::path progress = b.dir / ("work-" + pod) / ("progress-e" + std::to_string(epoch) + "-a1.jsonl");
  for (auto& j : read_lines(progress))
    if (j.value("event", "") == "checkpoint" && j.value("rank", -1) == 0 && j.value("stopping", false))
      return j["write_seconds"].get<double>() * 1000;
  return 0;
}

bool has_step_under(Bench& b, const std::string& pod, std::int64_t epoch) {
  return b.sidecar_event(pod, "first_step", epoch) > 0;
}

void print(const char* what, const Parts& p) {
  std::printf("%-14s stop %7.1f  checkpoint %6.1f  barrier %6.1f  spawn %7.1f  rendezvous %6.1f  first step %6.1f  total %7.1f ms\n",
              what, p.stop, p.checkpoint, p.barrier, p.spawn, p.rendezvous, p.first_step, p.total);
}

}  // namespace

int fail(const std::string& why) {
  std::fprintf(stderr, "bench_rescale_loop: %s\n", why.c_str());
  return 1;
}

int main(int argc, char** argv) {
  int trials = 3;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--trials") trials = std::atoi(argv[++i]);
  Bench b;
  b.dir = fs::temp_directory_path() / ("bench-rescale-loop-" + std::to_string(::getpid()));
  fs::create_directories(b.dir);
  {
    std::string text;
    std::uint64_t x = 42;
    while (text.size() < 40000) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text += static_cast<char>('a' + (x >> 33) % 26);
      if ((x >> 20) % 7 == 0) text += ' ';
    }
    b.corpus = b.dir / "corpus.txt";
    std::ofstream(b.corpus) << text;
  }
  if (!b.dc.start()) {
    std::fprintf(stderr, "bench_rescale_loop: devcluster did not start\n%s\n", b.dc.log().c_str());
    return 1;
  }
  auto config = flotilla::kube::load_kubeconfig(b.dc.kubeconfig().string());
  b.client = *flotilla::kube::Client::create(*config);
  std::printf("bench_rescale_loop: small GPT on CPU, devcluster, PP 2 -> 3 in one pod, %d trials\n", trials);
  std::vector<double> ratios, totals;
  for (int t = 0; t < trials; ++t) {
    const std::string pod = "r" + std::to_string(t), cold = "c" + std::to_string(t);
    const fs::path ck = b.dir / ("ck" + std::to_string(t));
    b.create_pod(pod, b.plan(2, 1, ck));
    if (!wait_for([&] { auto r = b.report(pod); return r && r->step >= 3; })) {
      std::fprintf(stderr, "trial %d: epoch 1 never trained\n", t);
      return 1;
    }
    PodPlan next = b.plan(3, 2, ck);
    next.barrier = 1;
    const double t_patch = now_ms();
    b.patch_plan(pod, next);
    if (!wait_for([&] { auto r = b.report(pod); return r && r->epoch == 2 && r->state == PodState::kStopped; })) return fail("no Stopped report for epoch 2");
    next.barrier = 2;
    b.patch_plan(pod, next);
    if (!wait_for([&] { return has_step_under(b, pod, 2); })) return fail("no step under epoch 2");
    Parts p;
    double first_ms = 0;
    std::this_thread::sleep_for(200ms);  // let every rank write its first step line
    if (!start_parts(b, pod, 2, p, &first_ms)) return fail("cannot read the epoch-2 progress");
    const double exited = b.sidecar_event(pod, "workers_exited", 2);
    p.checkpoint = checkpoint_write_ms(b, pod, 1);
    p.stop = exited - t_patch - p.checkpoint;
    p.barrier = b.sidecar_event(pod, "barrier_lifted", 2) - exited;
    p.total = first_ms - t_patch;
    // Baseline: the same layout (PP 3) cold, as a fresh pod resuming from the same checkpoint.
    b.client->remove(flotilla::kube::resources::pods, "default", pod);
    if (!wait_for([&] { return !b.client->get(flotilla::kube::resources::pods, "default", pod).ok(); })) return fail("pod not deleted");
    const double t_create = now_ms();
    b.create_pod(cold, b.plan(3, 1, ck));
    if (!wait_for([&] { return has_step_under(b, cold, 1); })) return fail("cold start never stepped");
    std::this_thread::sleep_for(200ms);
    Parts c;
    double cold_first_ms = 0;
    if (!start_parts(b, cold, 1, c, &cold_first_ms)) return fail("cannot read the cold progress");
    c.barrier = b.sidecar_event(cold, "barrier_lifted", 1) - t_create;  // pod start + plan seen
    c.total = cold_first_ms - t_create;
    b.client->remove(flotilla::kube::resources::pods, "default", cold);
    wait_for([&] { return !b.client->get(flotilla::kube::resources::pods, "default", cold).ok(); });
    std::printf("trial %d\n", t);
    print("  rescale", p);
    print("  cold start", c);
    std::printf("  ratio rescale/cold start: %.2f\n", p.total / c.total);
    ratios.push_back(p.total / c.total);
    totals.push_back(p.total);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(totals.begin(), totals.end());
  std::printf("median rescale %.1f ms (goal < 5000 ms: %s), median ratio against a cold start %.2f\n",
              totals[totals.size() / 2], totals[totals.size() / 2] < 5000 ? "met" : "MISSED",
              ratios[ratios.size() / 2]);
  fs::remove_all(b.dir);
  return 0;
}
