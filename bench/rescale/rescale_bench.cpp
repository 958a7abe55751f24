// bench_rescale: how long an elastic rescale takes, from the stop request (SIGTERM via
// `flotilla-worker relaunch`) to the first completed step under the new layout, and its parts:
//   finish step     the step in flight when SIGTERM arrived
//   checkpoint      the coordinated checkpoint write (rank 0's write_seconds)
//   handover        old launcher exit + new launcher spawning ranks
//   connect         new ranks' rendezvous (TCP mesh)
//   reshard+load    building the stage and loading its units from the checkpoint
//   first step      the first training step under the new layout
// Baseline, measured in the same run: a cold start of the new layout from the same checkpoint
// (launch -> first step). The ratio says what elasticity costs on top of simply starting.
// Usage: bench_rescale [--model small] [--trials 3] [--from "--pp 2"] [--to "--pp 3 ..."]
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "process/process_group.h"
#include "worker/runtime/progress_log.h"

namespace fs = std::filesystem;
using flotilla::process::ProcessGroup;
using flotilla::worker::unix_time_ms;
using json = nlohmann::json;

namespace {

std::vector<json> read_events(const fs::path& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(j);
  }
  return out;
}

std::vector<std::string> split_words(const std::string& s) {
  std::stringstream ss(s);
  std::vector<std::string> out;
  std::string w;
  while (ss >> w) out.push_back(w);
  return out;
}

// Waits until `pred(events)` holds; returns false after 120 s.
template <class F>
bool wait_for(const fs::path& progress, F pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred(read_events(progress))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int steps_done(const std::vector<json>& events) {
  int n = 0;
  for (const auto& e : events)
    if (e.value("event", "") == "step" && e.value("rank", -1) == 0) ++n;
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Trial {
  std::vector<std::pair<std::string, double>> parts_s;  // in the order they happen
  double total_s = 0, cold_start_s = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string model = "small", from = "--pp 2", to = "--pp 3 --partition 0:1,1:4,4:6";
  int trials = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model = v;
    else if (k == "--trials") trials = std::max(1, std::stoi(v));
    else if (k == "--from") from = v;
    else if (k == "--to") to = v;
    else {
      std::fprintf(stderr, "bench_rescale: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  const std::string bin = FLOTILLA_WORKER_BIN;
  const fs::path dir = fs::temp_directory_path() / ("flotilla_bench_rescale_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path data = dir / "corpus.txt";
  {
    std::ofstream out(data);
    std::uint64_t x = 7;
    static const char* words[] = {"elastic", "training", "keeps", "the", "loss", "exactly",
                                  "the", "same", "when", "stages", "move", "."};
    for (int i = 0; i < 20000; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      out << words[(x >> 33) % 12] << ' ';
    }
  }
  std::printf("bench_rescale: model %s, from [%s] to [%s], %d trials, CPU backend\n",
              model.c_str(), from.c_str(), to.c_str(), trials);
  std::vector<Trial> results;
  for (int t = 0; t < trials; ++t) {
    const fs::path ck = dir / ("ck" + std::to_string(t));
    const fs::path p1 = dir / ("old" + std::to_string(t) + ".jsonl");
    const fs::path p2 = dir / ("new" + std::to_string(t) + ".jsonl");
    const fs::path p3 = dir / ("cold" + std::to_string(t) + ".jsonl");
    auto job = [&](const std::string& layout, const fs::path& progress) {
      std::vector<std::string> a = split_words(layout);
      for (const std::string& s : {std::string("--model"), model, std::string("--data"),
                                   data.string(), std::string("--checkpoint-dir"), ck.string(),
                                   std::string("--steps"), std::string("100000"),
                                   std::string("--progress"), progress.string()})
        a.push_back(s);
      return a;
    };
    Trial r;
    {
      ProcessGroup old_job;
      auto a = job(from, p1);
      a.insert(a.begin(), "run");
      old_job.spawn(bin, a, {});
      if (!wait_for(p1, [](const auto& e) { return steps_done(e) >= 3; })) {
        std::fprintf(stderr, "bench_rescale: the first layout made no progress\n");
        return 1;
      }
      ProcessGroup new_job;
      auto b = job(to, p2);
      b.insert(b.begin(), "relaunch");
      const double stop_ms = unix_time_ms();
      new_job.spawn(bin, b, {});
      if (!wait_for(p2, [](const auto& e) { return steps_done(e) >= 1; })) {
        std::fprintf(stderr, "bench_rescale: the new layout made no progress\n");
        return 1;
      }
      auto old_events = read_events(p1);
      auto new_events = read_events(p2);
      new_job.signal_all(SIGTERM);
      new_job.wait_all();
      old_job.wait_all();
      double ckpt_done_ms = 0, ckpt_write_s = 0, first_spawn_ms = 1e300, ready_ms = 0;
      double connect_s = 0, load_s = 0, first_step_ms = 0;
      for (const auto& e : old_events)
        if (e.value("event", "") == "checkpoint" && e.value("stopping", false)) {
          ckpt_done_ms = std::max(ckpt_done_ms, e["time_unix_ms"].get<double>());
          if (e["rank"] == 0) ckpt_write_s = e["write_seconds"].get<double>();
        }
      for (const auto& e : new_events) {
        if (e.value("event", "") == "start") {
          first_spawn_ms = std::min(first_spawn_ms, e["process_start_unix_ms"].get<double>());
          ready_ms = std::max(ready_ms, e["time_unix_ms"].get<double>());
          connect_s = std::max(connect_s, e["connect_seconds"].get<double>());
          load_s = std::max(load_s, e["load_seconds"].get<double>());
        }
        if (e.value("event", "") == "step" && first_step_ms == 0 && e["rank"] == 0)
          first_step_ms = e["time_unix_ms"].get<double>();
      }
      const double finish_step_s = (ckpt_done_ms - stop_ms) / 1000.0 - ckpt_write_s;
      r.parts_s.emplace_back("finish step", finish_step_s);
      r.parts_s.emplace_back("checkpoint write", ckpt_write_s);
      r.parts_s.emplace_back("handover", (first_spawn_ms - ckpt_done_ms) / 1000.0);
      r.parts_s.emplace_back("connect", connect_s);
      r.parts_s.emplace_back("reshard+load", load_s);
      r.parts_s.emplace_back("start-up other", (ready_ms - first_spawn_ms) / 1000.0 - connect_s - load_s);
      r.parts_s.emplace_back("first step", (first_step_ms - ready_ms) / 1000.0);
      r.total_s = (first_step_ms - stop_ms) / 1000.0;
    }
    {
      // Baseline: cold start of the new layout from the checkpoint the rescale just left.
      ProcessGroup cold;
      auto c = job(to, p3);
      c.insert(c.begin(), "run");
      const double launch_ms = unix_time_ms();
      cold.spawn(bin, c, {});
      if (!wait_for(p3, [](const auto& e) { return steps_done(e) >= 1; })) return 1;
      double first_ms = 0;
      for (const auto& e : read_events(p3))
        if (e.value("event", "") == "step" && e["rank"] == 0) {
          first_ms = e["time_unix_ms"].get<double>();
          break;
        }
      cold.signal_all(SIGTERM);
      cold.wait_all();
      r.cold_start_s = (first_ms - launch_ms) / 1000.0;
    }
    results.push_back(r);
  }
  std::printf("\n%-18s %12s\n", "part (median)", "seconds");
  for (std::size_t k = 0; k < results.front().parts_s.size(); ++k) {
    const std::string& name = results.front().parts_s[k].first;
    std::vector<double> v;
    for (const auto& r : results) v.push_back(r.parts_s[k].second);
    std::printf("%-18s %12.4f\n", name.c_str(), median(v));
  }
  std::vector<double> totals, colds;
  for (const auto& r : results) {
    totals.push_back(r.total_s);
    colds.push_back(r.cold_start_s);
  }
  const double total = median(totals), cold = median(colds);
  std::printf("%-18s %12.4f   (stop request -> first step under the new layout; goal < 3 s: %s)\n",
              "rescale total", total, total < 3.0 ? "met" : "MISSED");
  std::printf("%-18s %12.4f   (baseline: launch -> first step, same layout, same checkpoint)\n",
              "cold start", cold);
  std::printf("ratio rescale / cold start: %.2fx\n", cold > 0 ? total / cold : 0.0);
  fs::remove_all(dir);
  return total < 3.0 ? 0 : 1;
}
