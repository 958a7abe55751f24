// bench_operator_scale: the real flotilla-operator over a real flotilla-devcluster with N virtual
// 8-GPU H100 nodes and N TrainingJobs submitted in one burst (issue 9).
//
// Pods start no process (the operator runs with --sidecar-command '', so every pod is a pause
// container on devcluster): what is measured is the operator's own work, the cluster pass
// (cluster view, job tables, the allocator) and the per-job reconciles (plan, status, pods).
//
// Each scale runs on its own devcluster and operator: start both, submit N jobs, wait until
// every job has a decision in its status (a plan with pods, or Planned=False saying why it
// waits), keep running --settle-s seconds so the steady-state requeues are measured too, then
// read the operator's /metrics (flotilla_reconcile_duration_seconds by kind; quantiles
// interpolated inside histogram buckets as PromQL's histogram_quantile does) and its RSS
// (/proc/<pid>/status VmRSS and VmHWM). The baseline is the same bench at --baseline-jobs jobs
// and nodes, run first in the same process; ratios are large scale over baseline. A plain
// devcluster GET round trip is measured in each cluster too, as the floor of any reconcile.
// Goals (issue 9): reconcile p99 < 50 ms, allocator pass < 1 s, RSS < 200 MB at 1,000 jobs.
//
// Nodes sit in one zone by default; --zones Z spreads them over Z zones, which the planner
// searches as Z pools of H100 (measured far slower: docs/operator.md, "Scale").
//
// Usage: bench_operator_scale [--jobs N] [--baseline-jobs B] [--zones Z] [--settle-s S] [--timeout-s T]
//        bench_operator_scale --quick   (100 jobs, baseline 10)
//        bench_operator_scale --smoke   (20 jobs, baseline 5, short settle: the ctest smoke)
// Exit status: 0 when every scale ran and every job got a decision (goals are printed, not
// enforced: shared machines are noisy), 1 otherwise.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/text_file.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/net/http_client.h"
#include "kube/yaml_json.h"
#include "process/free_port.h"
#include "process/spawn.h"

namespace fs = std::filesystem;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace kube = flotilla::kube;
namespace process = flotilla::process;

namespace {

const kube::Resource kTrainingJobs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};

using flotilla::read_text;

double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

template <class Pred>
bool poll_until(Pred pred, std::chrono::milliseconds limit, std::chrono::milliseconds every = 50ms) {
  const auto deadline = SteadyClock::now() + limit;
  while (SteadyClock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

// One histogram series of a Prometheus text exposition: cumulative counts per upper bound.
struct Histogram {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count), ascending, +Inf last
  double sum = 0, count = 0;

  // histogram_quantile(): linear inside the bucket that holds the rank; the highest finite
  // bound when the rank falls in +Inf.
  double quantile(double q) const {
    if (count <= 0 || buckets.empty()) return 0;
    const double rank = q * count;
    double lower = 0, below = 0;
    for (const auto& [le, cumulative] : buckets) {
      if (cumulative >= rank) {
        if (std::isinf(le)) return lower;
        const double in_bucket = cumulative - below;
        return in_bucket <= 0 ? le : lower + (le - lower) * (rank - below) / in_bucket;
      }
      lower = le;
      below = cumulative;
    }
    return lower;
  }
  // The smallest bucket bound every observation is under (the maximum, to bucket precision).
  double max_bound() const {
    for (const auto& [le, cumulative] : buckets)
      if (cumulative >= count) return le;
    return INFINITY;
  }
};

// Parses `name_bucket{...,le="x"} v`, `name_sum{...} v`, `name_count{...} v` for the series whose
// labels contain `selector` (e.g. kind="job").
Histogram parse_histogram(const std::string& text, const std::string& name, const std::string& selector) {
  Histogram h;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.find(selector) == std::string::npos) continue;
    const std::string rest = line.substr(name.size());
    const double value = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    if (rest.rfind("_bucket{", 0) == 0) {
      const auto le = rest.find("le=\"");
      if (le == std::string::npos) continue;
      const std::string bound = rest.substr(le + 4, rest.find('"', le + 4) - le - 4);
      h.buckets.emplace_back(bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr), value);
    } else if (rest.rfind("_sum{", 0) == 0) {
      h.sum = value;
    } else if (rest.rfind("_count{", 0) == 0) {
      h.count = value;
    }
  }
  std::sort(h.buckets.begin(), h.buckets.end());
  return h;
}

// kB of one /proc/<pid>/status field (VmRSS, VmHWM), -1 when unreadable.
long proc_status_kb(pid_t pid, const std::string& field) {
  std::istringstream in(read_text("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  return -1;
}

// The job mix: a few models (1 to several GPUs each on an H100), batch sizes and elasticity
// modes, so tables differ between jobs the way a shared cluster's do; seeds all differ. The
// reference worker trains only its own models, so the planner presets run as Megatron-LM jobs
// (no process starts here: the script path is never opened).
Json worker_for(const std::string& model) {
  if (model == "gpt-125m")
    return {{"kind", "flotilla"}, {"image", "flotilla-worker:bench"}, {"data", "/data/text.txt"}};
  return {{"kind", "megatron"},
          {"image", "megatron:bench"},
          {"data", "/data/text.txt"},
          {"megatron", {{"script", "/workspace/megatron-lm/pretrain_gpt.py"}}}};
}

Json job_manifest(int i) {
  static const char* models[] = {"gpt-125m", "Llama-3-8B", "GPT-Neo-2.7B", "Llama-2-7B"};
  static const char* modes[] = {"strict", "relaxed", "off"};
  static const int batches[] = {32, 64, 128};
  const std::string name = "job-" + std::to_string(i);
  return Json{{"apiVersion", "flotilla.io/v1alpha1"},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", name}, {"namespace", "default"}}},
              {"spec",
               {{"model", models[i % 4]},
                {"globalBatchSize", batches[(i / 4) % 3]},
                {"trainSteps", 1000},
                {"seed", i},
                {"priority", i % 5 == 0 ? 1 : 0},
                {"worker", worker_for(models[i % 4])},
                {"checkpoint", {{"path", "/tmp/flotilla-bench/" + name}}},
                {"resources", {{"maxGPUs", 16}}},
                {"elasticity", {{"mode", modes[(i / 12) % 3]}}}}}};
}

// A job is decided when its status carries a plan with pods, or Planned=False with the
// allocator's or the planner's reason (it waits for GPUs, or fits nowhere); the reconcile's
// placeholder before the first cluster pass (WaitingForAllocator) is no decision yet.
bool decided(const Json& job) {
  const Json status = job.value("status", Json::object());
  if (!status.value("/plan/pods"_json_pointer, Json::array()).empty()) return true;
  for (const Json& c : status.value("conditions", Json::array()))
    if (c.value("type", "") == "Planned" && c.value("status", "") == "False" &&
        c.value("reason", "") != "WaitingForAllocator")
      return true;
  return false;
}

struct ScaleResult {
  bool ok = false;
  std::string error;
  int jobs = 0, nodes = 0;
  double devcluster_start_s = 0, submit_s = 0, all_decided_s = 0;
  int with_pods = 0, waiting = 0;
  std::map<std::string, int> waiting_reasons;  // Planned=False reason -> jobs
  double get_p50_ms = 0, get_p99_ms = 0;
  Histogram job_reconcile, cluster_pass;
  long rss_kb = 0, hwm_kb = 0;
};

class Scale {
 public:
  Scale(int jobs, int zones, double settle_s, double timeout_s)
      : jobs_(jobs), zones_(zones), settle_s_(settle_s), timeout_s_(timeout_s) {
    dir_ =
        fs::temp_directory_path() / ("bench-operator-scale-" + std::to_string(getpid()) + "-" + std::to_string(jobs));
  }
  ~Scale() {
    if (operator_.pid() > 0) operator_.terminate(5000ms);
    if (devcluster_.pid() > 0) devcluster_.terminate(10000ms);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  ScaleResult run() {
    r_.jobs = r_.nodes = jobs_;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (!start_devcluster() || !install_crd() || !start_operator()) return r_;
    measure_get();
    if (!submit_jobs() || !wait_decided()) return r_;
    std::this_thread::sleep_for(std::chrono::duration<double>(settle_s_));
    const std::string metrics = scrape("/metrics");
    r_.job_reconcile = parse_histogram(metrics, "flotilla_reconcile_duration_seconds", "kind=\"job\"");
    r_.cluster_pass = parse_histogram(metrics, "flotilla_reconcile_duration_seconds", "kind=\"cluster\"");
    r_.rss_kb = proc_status_kb(operator_.pid(), "VmRSS");
    r_.hwm_kb = proc_status_kb(operator_.pid(), "VmHWM");
    r_.ok = r_.job_reconcile.count > 0 && r_.cluster_pass.count > 0;
    if (!r_.ok) r_.error = "the operator's /metrics has no reconcile histogram: " + metrics.substr(0, 200);
    return r_;
  }

 private:
  bool fail(const std::string& why, const fs::path& log = {}) {
    r_.error = why + (log.empty() ? "" : " (" + log.string() + ": " + read_text(log).substr(0, 2000) + ")");
    return false;
  }

  bool start_devcluster() {
    std::ofstream nodes(dir_ / "nodes.yaml");
    nodes << "nodes:\n";
    for (int i = 0; i < jobs_; ++i)
      nodes << "  - {name: node-" << i << ", gpuType: H100-80, gpuCount: 8, zone: zone-" << i % zones_ << "}\n";
    nodes.close();
    process::SpawnOptions o;
    o.argv = {std::string(FLOTILLA_BINARY_DIR) + "/devcluster/flotilla-devcluster",
              "--listen",
              "127.0.0.1:0",
              "--nodes",
              (dir_ / "nodes.yaml").string(),
              "--data-dir",
              (dir_ / "data").string(),
              "--kubeconfig-out",
              (dir_ / "kubeconfig").string(),
              "--watch-window",
              "200000"};
    o.isolation = process::Isolation::kSession;
    o.stdout_path = o.stderr_path = dir_ / "devcluster.log";
    o.exec_failure = process::ExecFailure::kExit;
    const auto start = SteadyClock::now();
    devcluster_ = process::spawn(o);
    if (!poll_until([&] { return fs::exists(dir_ / "kubeconfig") || !devcluster_.running(); }, 60s) ||
        !devcluster_.running())
      return fail("flotilla-devcluster did not start", dir_ / "devcluster.log");
    auto config = kube::load_kubeconfig((dir_ / "kubeconfig").string());
    if (!config) return fail("cannot read the kubeconfig: " + config.error().message);
    config_ = *config;
    auto client = kube::Client::create(*config);
    if (!client) return fail("cannot reach devcluster: " + client.error().message);
    client_ = *client;
    // Ready when every node is listed.
    if (!poll_until(
            [&] {
              auto nodes_listed = client_->list(kube::resources::nodes, "");
              return nodes_listed && static_cast<int>((*nodes_listed)["items"].size()) == jobs_;
            },
            60s, 100ms))
      return fail("devcluster did not list all " + std::to_string(jobs_) + " nodes", dir_ / "devcluster.log");
    r_.devcluster_start_s = seconds_since(start);
    return true;
  }

  bool install_crd() {
    std::vector<Json> docs;
    std::string error;
    if (!kube::parse_yaml_documents(read_text(std::string(FLOTILLA_SOURCE_DIR) + "/crds/flotilla.io_trainingjobs.yaml"),
                                    &docs, &error) ||
        docs.empty())
      return fail("the CRD does not parse: " + error);
    for (const Json& crd : docs)
      if (auto created = client_->create(kube::resources::custom_resource_definitions, "", crd); !created)
        return fail("installing the CRD failed: " + created.error().message);
    if (!poll_until([&] { return client_->list(kTrainingJobs, "").ok(); }, 10s))
      return fail("the TrainingJob resource did not become servable within 10 s");
    return true;
  }

  bool start_operator() {
    metrics_port_ = process::pick_free_port();
    const int health_port = process::pick_free_port();
    process::SpawnOptions o;
    o.argv = {std::string(FLOTILLA_BINARY_DIR) + "/operator/flotilla-operator",
              "--kubeconfig",
              (dir_ / "kubeconfig").string(),
              "--metrics-addr",
              "127.0.0.1:" + std::to_string(metrics_port_),
              "--health-addr",
              "127.0.0.1:" + std::to_string(health_port),
              "--sidecar-command",
              ""};  // pause pods: devcluster starts no process for them
    o.isolation = process::Isolation::kSession;
    o.stdout_path = o.stderr_path = dir_ / "operator.log";
    o.exec_failure = process::ExecFailure::kExit;
    operator_ = process::spawn(o);
    kube::net::ClientConfig health;
    health.server = "http://127.0.0.1:" + std::to_string(health_port);
    health.connect_timeout = 1000ms;
    std::string error;
    auto http = kube::net::HttpClient::create(health, &error);
    if (!http) return fail("cannot create an HTTP client: " + error);
    if (!poll_until(
            [&] {
              const auto resp = http->get("/readyz");
              return !operator_.running() || (resp.ok() && resp.response.status == 200);
            },
            30s, 100ms) ||
        !operator_.running())
      return fail("flotilla-operator did not become ready", dir_ / "operator.log");
    return true;
  }

  std::string scrape(const std::string& path) {
    kube::net::ClientConfig c;
    c.server = "http://127.0.0.1:" + std::to_string(metrics_port_);
    std::string error;
    auto http = kube::net::HttpClient::create(c, &error);
    if (!http) return "";
    const auto resp = http->get(path);
    return resp.ok() ? resp.response.body : "";
  }

  // The floor of any reconcile: one GET of a node from devcluster, over a kept-alive connection.
  void measure_get() {
    std::vector<double> ms;
    for (int i = 0; i < 200; ++i) {
      const auto t = SteadyClock::now();
      auto node = client_->get(kube::resources::nodes, "", "node-" + std::to_string(i % jobs_));
      if (node) ms.push_back(seconds_since(t) * 1e3);
    }
    r_.get_p50_ms = percentile(ms, 0.5);
    r_.get_p99_ms = percentile(ms, 0.99);
  }

  bool submit_jobs() {
    const auto start = SteadyClock::now();
    for (int i = 0; i < jobs_; ++i)
      if (auto created = client_->create(kTrainingJobs, "default", job_manifest(i)); !created)
        return fail("creating job-" + std::to_string(i) + " failed: " + created.error().message);
    r_.submit_s = seconds_since(start);
    submitted_ = start;
    return true;
  }

  bool wait_decided() {
    int last_decided = -1;
    auto last_progress = SteadyClock::now();
    while (seconds_since(submitted_) < timeout_s_) {
      auto listed = client_->list(kTrainingJobs, "default");
      if (!operator_.running()) return fail("flotilla-operator exited", dir_ / "operator.log");
      if (listed) {
        int count = 0, with_pods = 0;
        std::map<std::string, int> reasons;
        for (const Json& job : (*listed)["items"]) {
          if (!decided(job)) continue;
          ++count;
          if (!job.value("/status/plan/pods"_json_pointer, Json::array()).empty()) {
            ++with_pods;
            continue;
          }
          for (const Json& c : job["status"].value("conditions", Json::array()))
            if (c.value("type", "") == "Planned")
              ++reasons[c.value("reason", "") + ": " + c.value("message", "").substr(0, 120)];
        }
        r_.waiting_reasons = reasons;
        if (count != last_decided) {
          std::printf("  %4d jobs: %4d decided (%d with pods) after %.1f s\n", jobs_, count, with_pods,
                      seconds_since(submitted_));
          std::fflush(stdout);
          last_decided = count;
          last_progress = SteadyClock::now();
        }
        if (count == jobs_) {
          r_.all_decided_s = seconds_since(submitted_);
          r_.with_pods = with_pods;
          r_.waiting = count - with_pods;
          return true;
        }
      }
      (void)last_progress;
      std::this_thread::sleep_for(500ms);
    }
    return fail("not every job got a decision within " + std::to_string(timeout_s_) + " s", dir_ / "operator.log");
  }

  int jobs_, zones_;
  double settle_s_, timeout_s_;
  fs::path dir_;
  ScaleResult r_;
  process::Child devcluster_, operator_;
  kube::Config config_;
  std::shared_ptr<kube::Client> client_;
  int metrics_port_ = 0;
  SteadyClock::time_point submitted_;
};

// True when some job waits for its spec's fault (Planned=False InvalidSpec or MegatronCannotRun,
// not a wait for GPUs), said on stderr: the bench would then measure nothing of those jobs.
bool mix_refused(const ScaleResult& r) {
  for (const auto& [reason, n] : r.waiting_reasons)
    if (reason.rfind("InvalidSpec", 0) == 0 || reason.rfind("MegatronCannotRun", 0) == 0) {
      std::fprintf(stderr,
                   "bench_operator_scale: the job mix is not valid, so the bench measures nothing: %d jobs %s\n", n,
                   reason.c_str());
      return true;
    }
  return false;
}

void print(const ScaleResult& r) {
  std::printf(
      "%5d jobs on %5d nodes x 8 H100: devcluster up %.1f s, submitted in %.1f s, all decided after %.1f s "
      "(%d with pods, %d waiting)\n",
      r.jobs, r.nodes, r.devcluster_start_s, r.submit_s, r.all_decided_s, r.with_pods, r.waiting);
  for (const auto& [reason, n] : r.waiting_reasons) std::printf("  waiting %4d: %s\n", n, reason.c_str());
  std::printf("  job reconcile: %6.0f calls  p50 %8.2f ms  p99 %8.2f ms  mean %8.2f ms  max <= %g s\n",
              r.job_reconcile.count, r.job_reconcile.quantile(0.5) * 1e3, r.job_reconcile.quantile(0.99) * 1e3,
              r.job_reconcile.count > 0 ? r.job_reconcile.sum / r.job_reconcile.count * 1e3 : 0,
              r.job_reconcile.max_bound());
  std::printf("  cluster pass:  %6.0f passes p50 %8.2f ms  p99 %8.2f ms  mean %8.2f ms  max <= %g s\n",
              r.cluster_pass.count, r.cluster_pass.quantile(0.5) * 1e3, r.cluster_pass.quantile(0.99) * 1e3,
              r.cluster_pass.count > 0 ? r.cluster_pass.sum / r.cluster_pass.count * 1e3 : 0,
              r.cluster_pass.max_bound());
  std::printf("  operator RSS %.1f MB (peak %.1f MB); devcluster GET p50 %.2f ms p99 %.2f ms\n", r.rss_kb / 1024.0,
              r.hwm_kb / 1024.0, r.get_p50_ms, r.get_p99_ms);
  std::fflush(stdout);
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

int main(int argc, char** argv) {
  int jobs = 1000, baseline = 10, zones = 1;
  double settle_s = 15, timeout_s = 900;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atof(argv[++i]) : 0.0; };
    if (a == "--jobs")
      jobs = static_cast<int>(next());
    else if (a == "--baseline-jobs")
      baseline = static_cast<int>(next());
    else if (a == "--settle-s")
      settle_s = next();
    else if (a == "--zones")
      zones = static_cast<int>(next());
    else if (a == "--timeout-s")
      timeout_s = next();
    else if (a == "--quick")
      jobs = 100, baseline = 10;
    else if (a == "--smoke")
      jobs = 20, baseline = 5, settle_s = 6, timeout_s = 60;
    else {
      std::fprintf(
          stderr,
          "usage: bench_operator_scale [--jobs N] [--baseline-jobs B] [--zones Z] [--settle-s S] [--timeout-s T] "
          "[--quick] [--smoke]\n");
      return 2;
    }
  }
  if (jobs < 1 || baseline < 1 || zones < 1) {
    std::fprintf(stderr, "bench_operator_scale: --jobs, --baseline-jobs and --zones must be at least 1\n");
    return 2;
  }
  std::printf(
      "bench_operator_scale: baseline %d jobs, then %d jobs; one node (8 H100) per job in %d zone(s); "
      "settle %.0f s; %u cores here\n",
      baseline, jobs, zones, settle_s, std::thread::hardware_concurrency());
  std::fflush(stdout);
  ScaleResult base, big;
  {
    Scale s(baseline, zones, settle_s, timeout_s);
    base = s.run();
  }
  if (!base.ok) {
    std::fprintf(stderr, "bench_operator_scale: baseline failed: %s\n", base.error.c_str());
    return 1;
  }
  print(base);
  if (mix_refused(base)) return 1;
  {
    Scale s(jobs, zones, settle_s, timeout_s);
    big = s.run();
  }
  if (!big.ok) {
    std::fprintf(stderr, "bench_operator_scale: %d jobs failed: %s\n", jobs, big.error.c_str());
    return 1;
  }
  print(big);
  if (mix_refused(big)) return 1;
  const double scale = ratio(jobs, baseline);
  std::printf(
      "ratio %d / %d jobs (x%.0f): reconcile p50 x%.2f, p99 x%.2f; cluster pass p99 x%.2f; RSS x%.2f; "
      "GET p50 x%.2f\n",
      jobs, baseline, scale, ratio(big.job_reconcile.quantile(0.5), base.job_reconcile.quantile(0.5)),
      ratio(big.job_reconcile.quantile(0.99), base.job_reconcile.quantile(0.99)),
      ratio(big.cluster_pass.quantile(0.99), base.cluster_pass.quantile(0.99)),
      ratio(static_cast<double>(big.rss_kb), static_cast<double>(base.rss_kb)), ratio(big.get_p50_ms, base.get_p50_ms));
  const double p99_ms = big.job_reconcile.quantile(0.99) * 1e3;
  const double pass_max_s = big.cluster_pass.max_bound();
  std::printf(
      "goal reconcile p99 < 50 ms: %s (%.2f ms); allocator pass < 1 s: %s (every pass <= %g s); "
      "RSS < 200 MB: %s (%.1f MB peak)\n",
      p99_ms < 50 ? "met" : "MISSED", p99_ms, pass_max_s <= 1 ? "met" : "MISSED", pass_max_s,
      big.hwm_kb < 200 * 1024 ? "met" : "MISSED", big.hwm_kb / 1024.0);
  return 0;
}
