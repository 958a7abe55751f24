#include "simulator/trace_loader.h"

#include "planner/cluster.h"
#include "planner/gpu_catalog.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

namespace flotilla::simulator {

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, ',')) {
    if (!cell.empty() && cell.back() == '\r') cell.pop_back();
    out.push_back(cell);
  }
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

bool to_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end && *end == '\0' && std::isfinite(v);
}

// GPU counts are whole numbers; anything above this is a typo, and casting it to int would be
// undefined behaviour.
constexpr double kMaxGpuCount = 1 << 20;

bool to_gpu_count(const std::string& s, double& v) {
  return to_double(s, v) && v == std::floor(v) && v >= 0 && v <= kMaxGpuCount;
}

// Opens `path` for reading, or says in one line why not. A directory is refused by name: an
// ifstream opens one without complaint and then reads nothing.
std::string open_input(const std::string& path, const std::string& what, const std::string& flag,
                       std::ifstream& in) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return what + " " + path + " is a directory: give a file (" + flag + " FILE)";
  in.open(path);
  if (!in) return "cannot read " + what + " " + path + ": check the path (" + flag + " FILE)";
  return {};
}

// "trace F line N: <what> must be in [0, 315576000] s (10 years); got X" or "" when in range.
std::string time_limit_error(const std::string& where, const std::string& what, double v) {
  if (v >= 0 && v <= kMaxTraceSeconds) return {};
  std::ostringstream os;
  os << where << ": " << what << " must be in [0, " << static_cast<long long>(kMaxTraceSeconds)
     << "] s (10 years); got " << v;
  return os.str();
}

int column(const std::vector<std::string>& header, const std::string& name) {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : static_cast<int>(it - header.begin());
}

}  // namespace

TraceLoad load_trace(const std::string& path) {
  TraceLoad out;
  std::ifstream in;
  out.error = open_input(path, "trace", "--trace", in);
  if (!out.error.empty()) return out;
  std::string line;
  if (!std::getline(in, line)) {
    out.error = "trace " + path + " is empty: expected a CSV header";
    return out;
  }
  const auto header = split_csv(line);
  const bool elasticflow = column(header, "submission_time") >= 0;
  const bool alibaba = column(header, "creation_time") >= 0;
  if (!elasticflow && !alibaba && column(header, "num_gpu") >= 0 && column(header, "name") >= 0) {
    out.error = "trace " + path +
                " lists pods without creation/deletion times, so it cannot be replayed; use an "
                "Alibaba pod list with creation_time,deletion_time,scheduled_time "
                "(e.g. openb_pod_list_default.csv)";
    return out;
  }
  if (!elasticflow && !alibaba) {
    out.error = "trace " + path +
                ": unknown header; expected `job_id,submission_time,duration,num_gpu` "
                "(ElasticFlow) or the Alibaba GPU v2023 pod list";
    return out;
  }
  const int c_id = elasticflow ? column(header, "job_id") : column(header, "name");
  const int c_gpu = column(header, "num_gpu");
  const int c_submit = elasticflow ? column(header, "submission_time") : column(header, "creation_time");
  const int c_dur = column(header, "duration");
  const int c_del = column(header, "deletion_time");
  const int c_sched = column(header, "scheduled_time");
  const int c_spec = column(header, "gpu_spec");  // Alibaba: allowed GPU models, '|'-separated
  if (c_id < 0 || c_gpu < 0 || c_submit < 0 || (elasticflow && c_dur < 0) ||
      (alibaba && (c_del < 0 || c_sched < 0))) {
    out.error = "trace " + path + ": header lacks a required column";
    return out;
  }
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv(line);
    auto cell = [&](int c) { return c < static_cast<int>(cells.size()) ? cells[c] : std::string(); };
    double gpus = 0, submit = 0, dur = 0;
    if (!to_gpu_count(cell(c_gpu), gpus) || !to_double(cell(c_submit), submit)) {
      out.error = "trace " + path + " line " + std::to_string(line_no) +
                  ": num_gpu must be a whole number in [0, 2^20] and the submission time a number";
      return out;
    }
    if (elasticflow) {
      if (!to_double(cell(c_dur), dur) || dur < 0) {
        out.error = "trace " + path + " line " + std::to_string(line_no) +
                    ": duration must be a number >= 0";
        return out;
      }
    } else {
      double del = 0, sched = 0;
      if (!to_double(cell(c_del), del)) {
        ++out.skipped_rows;  // still running at the end of the trace
        continue;
      }
      if (!to_double(cell(c_sched), sched) || sched <= 0) sched = submit;
      dur = del - sched;
      if (dur < 0) {
        ++out.skipped_rows;
        continue;
      }
    }
    const std::string where = "trace " + path + " line " + std::to_string(line_no);
    if (auto e = time_limit_error(where, "duration", dur); !e.empty()) {
      out.error = e;
      return out;
    }
    if (auto e = time_limit_error(where, "submission time", submit); !e.empty()) {
      out.error = e;
      return out;
    }
    if (gpus < 1) {
      ++out.skipped_rows;
      continue;
    }
    TraceJob job{cell(c_id), submit, dur, static_cast<int>(gpus), {}};
    if (c_spec >= 0) {
      std::stringstream spec(cell(c_spec));
      for (std::string type; std::getline(spec, type, '|');)
        if (!type.empty()) job.gpu_types.push_back(type);
    }
    out.jobs.push_back(std::move(job));
  }
  std::stable_sort(out.jobs.begin(), out.jobs.end(),
                   [](const TraceJob& a, const TraceJob& b) { return a.submit_s < b.submit_s; });
  return out;
}

AvailabilityLoad load_availability_trace(const std::string& path) {
  AvailabilityLoad out;
  std::ifstream in;
  out.error = open_input(path, "availability trace", "--trace", in);
  if (!out.error.empty()) return out;
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  const std::string shape = " [{\"Time\": seconds, \"GPUs\": count}, ...]";
  if (doc.is_discarded() || !doc.is_array()) {
    out.error = "availability trace " + path + " is not a JSON array; expected" + shape;
    return out;
  }
  if (doc.empty()) {
    out.error = "availability trace " + path + " has no rows; expected" + shape;
    return out;
  }
  double last = -1;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const auto& row = doc[i];
    const std::string where = "availability trace " + path + " row " + std::to_string(i);
    if (!row.is_object() || !row.contains("Time") || !row.contains("GPUs") ||
        !row["Time"].is_number() || !row["GPUs"].is_number()) {
      out.error = where + ": expected {\"Time\": seconds, \"GPUs\": count}";
      return out;
    }
    const double t = row["Time"].get<double>();
    const double g = row["GPUs"].get<double>();
    if (auto e = time_limit_error(where, "Time", t); !e.empty()) {
      out.error = e;
      return out;
    }
    if (!(g == std::floor(g) && g >= 0 && g <= kMaxAvailabilityGpus)) {
      std::ostringstream os;
      os << where << ": GPUs must be a whole number in [0, " << kMaxAvailabilityGpus
         << "] (GPUs one job may be offered); got " << std::setprecision(17) << g;
      out.error = os.str();
      return out;
    }
    if (t < last) {
      out.error = where + ": Time goes backwards (" + std::to_string(t) + " after " +
                  std::to_string(last) + "); rows must be in time order";
      return out;
    }
    last = t;
    out.points.push_back({t, static_cast<int>(g)});
  }
  // The replay ends at the last row: with every row at one time there is nothing to replay,
  // and an all-zero result would look like a measurement.
  if (out.points.back().time_s == out.points.front().time_s) {
    out.error = "availability trace " + path + " spans 0 s (every row at Time " +
                std::to_string(out.points.front().time_s) +
                "); it needs a later row, the replay ends at the last row's Time";
    out.points.clear();
  }
  return out;
}

ClusterLoad load_cluster(const std::string& path) {
  ClusterLoad out;
  std::ifstream in;
  out.error = open_input(path, "cluster", "--cluster", in);
  if (!out.error.empty()) return out;
  std::string first;
  std::getline(in, first);
  if (first.rfind("sn,", 0) == 0) {  // Alibaba node list
    const auto header = split_csv(first);
    const int c_sn = column(header, "sn"), c_gpu = column(header, "gpu"),
              c_model = column(header, "model");
    if (c_gpu < 0) {
      out.error = "cluster " + path + ": node list header lacks a `gpu` column";
      return out;
    }
    std::string line;
    int line_no = 1;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty() || line == "\r") continue;
      const auto cells = split_csv(line);
      double g = 0;
      if (c_gpu >= static_cast<int>(cells.size()) || !to_gpu_count(cells[c_gpu], g)) {
        out.error = "cluster " + path + " line " + std::to_string(line_no) +
                    ": gpu must be a whole number in [0, 2^20]";
        return out;
      }
      if (g < 1) continue;
      SimNode n;
      n.name = c_sn >= 0 ? cells[c_sn] : "";
      n.gpu_type = c_model >= 0 && c_model < static_cast<int>(cells.size()) ? cells[c_model] : "";
      n.zone = "alibaba";
      n.gpus = static_cast<int>(g);
      out.nodes.push_back(n);
    }
  } else {
    // The planner's cluster.yaml (planner/cluster.h), so one file serves `plan` and `simulate`.
    std::stringstream text;
    text << first << '\n' << in.rdbuf();
    const auto catalog = planner::builtin_gpu_catalog();
    const auto spec = planner::parse_cluster(text.str(), catalog);
    if (!spec.ok()) {
      out.error = "cluster " + path + ": " + spec.error();
      return out;
    }
    for (const auto& n : spec->nodes) out.nodes.push_back({n.name, n.gpu_type, n.zone, n.gpus});
  }
  if (out.nodes.empty()) out.error = "cluster " + path + " has no GPU nodes";
  return out;
}

std::vector<SimNode> auto_cluster(const std::vector<TraceJob>& jobs, double target_load,
                                  int gpus_per_node) {
  double gpu_s = 0, first = INFINITY, last = -INFINITY;
  int largest = 1;
  for (const auto& j : jobs) {
    gpu_s += j.gpus * j.duration_s;
    first = std::min(first, j.submit_s);
    last = std::max(last, j.submit_s);
    largest = std::max(largest, j.gpus);
  }
  const double span = last > first ? last - first : 1.0;
  const double mean_demand = gpu_s / span;
  // Twice the largest job, so one large job cannot block the whole cluster by itself.
  // Clamped before the cast: a tiny target_load would otherwise overflow int.
  const double wanted = std::min(std::ceil(mean_demand / target_load), double{1 << 24});
  const int gpus = std::max(2 * largest, static_cast<int>(wanted));
  const int n = std::max(1, (gpus + gpus_per_node - 1) / gpus_per_node);
  std::vector<SimNode> nodes(n);
  for (int i = 0; i < n; ++i) nodes[i] = {"auto-" + std::to_string(i), "H100-80", "a", gpus_per_node};
  return nodes;
}

}  // namespace flotilla::simulator
