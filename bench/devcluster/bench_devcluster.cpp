// bench_devcluster: write throughput and watch fan-out of a real flotilla-devcluster process
// pinned to one CPU core, with 10,000 pods.
//
// Phases: (1) create N pods from 8 client connections; (2) patch pods while 1 watcher
// follows (baseline); (3) the same with W watchers. For each phase: writes/s, the time from
// the last acknowledged write until every watcher has seen it ("catch-up"), and the p50/p99
// delivery lag of every event to every watcher. Ratios compare phase 3 against phase 2,
// measured in the same run. Goal (issue 4): >= 1,000 writes/s on one core, all watchers up to
// date within 100 ms.
//
// Usage: bench_devcluster [--pods N] [--updates U] [--watchers W]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "common/text_file.h"
#include "kube/net/http_client.h"
#include "process/spawn.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using flotilla::kube::net::HttpClient;

namespace {

using flotilla::read_text;

double ms_since(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// The resourceVersion of a watch line, without a full JSON parse (cheap on the client side).
uint64_t rv_of(const std::string& line) {
  auto p = line.find("\"resourceVersion\":\"");
  if (p == std::string::npos) return 0;
  return std::strtoull(line.c_str() + p + 19, nullptr, 10);
}

struct Server {
  flotilla::process::Child child;
  fs::path dir;
  flotilla::kube::net::ClientConfig config;
  bool start(int cpu) {
    dir = fs::temp_directory_path() / ("bench-devcluster-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "nodes.yaml") << "nodes:\n  - {name: n0, gpuType: A100-80GB, gpuCount: 8}\n";
    std::string bin = std::string(FLOTILLA_BINARY_DIR) + "/devcluster/flotilla-devcluster";
    flotilla::process::SpawnOptions options;
    options.argv = {bin, "--listen", "127.0.0.1:0", "--nodes", (dir / "nodes.yaml").string(), "--data-dir",
                    (dir / "data").string(), "--kubeconfig-out", (dir / "kubeconfig").string(),
                    "--watch-window", "200000"};
    options.cpu = cpu;  // the server gets exactly one core
    options.stdout_path = dir / "server.log";
    options.stderr_path = dir / "server.log";
    options.isolation = flotilla::process::Isolation::kNone;
    options.exec_failure = flotilla::process::ExecFailure::kExit;
    child = flotilla::process::spawn(options);
    for (int i = 0; i < 400 && read_text(dir / "kubeconfig").find("current-context") == std::string::npos; ++i)
      std::this_thread::sleep_for(50ms);
    std::string kc = read_text(dir / "kubeconfig");
    if (kc.empty()) return false;
    auto s = kc.find("server: ") + 8;
    config.server = kc.substr(s, kc.find('\n', s) - s);
    config.tls.ca_pem = read_text(dir / "data" / "pki" / "ca.crt");
    config.bearer_token = read_text(dir / "data" / "token");
    return true;
  }
  void stop() {
    if (child.valid()) {
      child.signal(SIGTERM);
      child.wait();
    }
    fs::remove_all(dir);
  }
};

std::unique_ptr<HttpClient> client(const Server& s) {
  std::string e;
  auto c = HttpClient::create(s.config, &e);
  if (!c) std::cerr << e << "\n";
  return c;
}

struct Watcher {
  std::unique_ptr<HttpClient> http;
  std::unique_ptr<flotilla::kube::net::HttpStream> stream;
  std::vector<std::pair<uint64_t, Clock::time_point>> seen;
  std::atomic<uint64_t> last_rv{0};
  std::thread thread;
};

struct PhaseResult {
  double writes_per_s = 0;
  double catch_up_ms = 0;
  double p50_lag_ms = 0, p99_lag_ms = 0;
};

// Runs `total` writes from `threads` connections; `make` builds request i.
template <class Make>
double run_writes(const Server& s, int total, int threads, Make make, std::map<uint64_t, Clock::time_point>* acks,
                  Clock::time_point* last_ack) {
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  std::mutex m;
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      auto c = client(s);
      for (int i = next++; i < total; i = next++) {
        auto [method, path, body, ct] = make(i);
        auto r = c->send(method, path, body, ct);
        auto now = Clock::now();
        if (!r.ok() || r.response.status >= 300) {
          ++failures;
          continue;
        }
        if (acks) {
          std::lock_guard lock(m);
          (*acks)[rv_of(r.response.body)] = now;
          *last_ack = std::max(*last_ack, now);
        }
      }
    });
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failures) std::cerr << "warning: " << failures << " writes failed\n";
  return total / secs;
}

PhaseResult fanout_phase(const Server& s, int pods, int updates, int watchers, int tag) {
  uint64_t start_rv;
  {
    auto c = client(s);
    auto r = c->get("/api/v1/namespaces/default/pods?limit=1");
    start_rv = std::stoull(nlohmann::json::parse(r.response.body)["metadata"]["resourceVersion"].get<std::string>());
  }
  std::vector<std::unique_ptr<Watcher>> ws;
  for (int i = 0; i < watchers; ++i) {
    auto w = std::make_unique<Watcher>();
    w->http = client(s);
    flotilla::kube::net::HttpRequest req;
    req.target = "/api/v1/pods?watch=true&resourceVersion=" + std::to_string(start_rv);
    std::string e;
    w->stream = w->http->open_stream(req, &e);
    if (!w->stream) {
      std::cerr << "watch failed: " << e << "\n";
      std::exit(1);
    }
    w->seen.reserve(updates + 16);
    Watcher* wp = w.get();
    w->thread = std::thread([wp] {
      std::string line;
      while (wp->stream->next_line(&line, 5000ms) == flotilla::kube::net::StreamStatus::line) {
        uint64_t rv = rv_of(line);
        wp->seen.emplace_back(rv, Clock::now());
        wp->last_rv.store(rv);
      }
    });
    ws.push_back(std::move(w));
  }
  std::map<uint64_t, Clock::time_point> acks;
  Clock::time_point last_ack{};
  PhaseResult res;
  res.writes_per_s = run_writes(s, updates, 4, [&](int i) {
    std::string name = "pod-" + std::to_string(i % pods);
    return std::make_tuple(std::string("PATCH"), "/api/v1/namespaces/default/pods/" + name,
                           "{\"metadata\":{\"labels\":{\"round\":\"" + std::to_string(tag) + "-" + std::to_string(i) + "\"}}}",
                           std::string("application/merge-patch+json"));
  }, &acks, &last_ack);
  uint64_t final_rv = acks.rbegin()->first;
  auto deadline = Clock::now() + 30s;
  for (auto& w : ws)
    while (w->last_rv.load() < final_rv && Clock::now() < deadline) std::this_thread::sleep_for(200us);
  auto caught_up = Clock::now();
  res.catch_up_ms = ms_since(last_ack, caught_up);
  std::vector<double> lags;
  for (auto& w : ws) {
    w->stream->cancel();
    w->thread.join();
    for (const auto& [rv, at] : w->seen) {
      auto it = acks.find(rv);
      if (it != acks.end()) lags.push_back(std::max(0.0, ms_since(it->second, at)));
    }
  }
  std::sort(lags.begin(), lags.end());
  if (!lags.empty()) {
    res.p50_lag_ms = lags[lags.size() / 2];
    res.p99_lag_ms = lags[std::min(lags.size() - 1, lags.size() * 99 / 100)];
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  int pods = 10000, updates = 5000, watchers = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--pods") pods = v;
    else if (a == "--updates") updates = v;
    else if (a == "--watchers") watchers = v;
    else {
      std::cerr << "usage: bench_devcluster [--pods N] [--updates U] [--watchers W]\n";
      return 2;
    }
  }
  Server server;
  if (!server.start(0)) {
    std::cerr << "bench_devcluster: devcluster did not start: " << read_text(server.dir / "server.log") << "\n";
    return 1;
  }
  // The load generator stays off the server's core where there is another one.
  if (std::thread::hardware_concurrency() > 1) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c = 1; c < std::thread::hardware_concurrency(); ++c) CPU_SET(c, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  std::printf("bench_devcluster: devcluster pinned to 1 core, %d pods, %d updates per fan-out phase, %u cores here\n", pods,
              updates, std::thread::hardware_concurrency());
  double create_rate = run_writes(server, pods, 8, [&](int i) {
    std::string body = "{\"metadata\":{\"name\":\"pod-" + std::to_string(i) +
                       "\",\"labels\":{\"app\":\"bench\"}},\"spec\":{\"schedulerName\":\"bench-none\",\"containers\":[{\"name\":\"c\","
                       "\"image\":\"none\",\"command\":[\"sleep\",\"1\"]}]}}";
    return std::make_tuple(std::string("POST"), std::string("/api/v1/namespaces/default/pods"), body, std::string("application/json"));
  }, nullptr, nullptr);
  std::printf("create:   %6d pods      %8.0f writes/s\n", pods, create_rate);
  auto list_t0 = Clock::now();
  auto c = client(server);
  auto all = c->get("/api/v1/namespaces/default/pods");
  double list_ms = ms_since(list_t0, Clock::now());
  size_t listed = all.ok() ? nlohmann::json::parse(all.response.body)["items"].size() : 0;
  std::printf("list:     %6zu pods      %8.1f ms\n", listed, list_ms);

  PhaseResult base = fanout_phase(server, pods, updates, 1, 1);
  PhaseResult fan = fanout_phase(server, pods, updates, watchers, 2);
  std::printf("patch, %3d watcher(s): %8.0f writes/s  catch-up %6.1f ms  lag p50 %6.2f ms  p99 %6.2f ms\n", 1,
              base.writes_per_s, base.catch_up_ms, base.p50_lag_ms, base.p99_lag_ms);
  std::printf("patch, %3d watcher(s): %8.0f writes/s  catch-up %6.1f ms  lag p50 %6.2f ms  p99 %6.2f ms\n", watchers,
              fan.writes_per_s, fan.catch_up_ms, fan.p50_lag_ms, fan.p99_lag_ms);
  std::printf("ratio %d watchers / 1 watcher: throughput x%.2f, p99 lag x%.2f, catch-up x%.2f\n", watchers,
              fan.writes_per_s / base.writes_per_s, fan.p99_lag_ms / std::max(0.01, base.p99_lag_ms),
              fan.catch_up_ms / std::max(0.01, base.catch_up_ms));
  bool write_goal = std::min({create_rate, base.writes_per_s, fan.writes_per_s}) >= 1000;
  bool watch_goal = fan.catch_up_ms <= 100;
  std::printf("goal >= 1000 writes/s on one core: %s; all %d watchers up to date within 100 ms: %s\n",
              write_goal ? "met" : "NOT met", watchers, watch_goal ? "met" : "NOT met");
  server.stop();
  return 0;
}
