// Trace and cluster loading for the simulator shell (this file does I/O; the core does not).
//
// Traces:
//   ElasticFlow CSV  header `job_id,submission_time,duration,num_gpu` (seconds, GPUs).
//   Alibaba GPU v2023 pod list  header starting `name,cpu_milli,...` with num_gpu,
//     creation_time, deletion_time, scheduled_time: submit = creation_time, duration =
//     deletion_time − scheduled_time (creation when unscheduled); pods with num_gpu = 0 (CPU or
//     fractional-GPU sharing pods) and pods without a deletion time are skipped; gpu_spec
//     (e.g. `V100M16|V100M32`) becomes TraceJob::gpu_types, the types the pod may run on.
// Clusters:
//   YAML   the planner's cluster.yaml (planner/cluster.h): `nodes: [{name, gpu, count, zone}]`
//          (count = GPUs on that node) and/or `pools: [{gpu, nodes, gpus_per_node, zone}]`.
//   Alibaba node list CSV `sn,cpu_milli,memory_mib,gpu,model`; nodes with 0 GPUs are dropped.
// GPU counts (num_gpu, gpu) must be whole numbers in [0, 2^20]; anything else is an error.
// Times: a job's duration and submission time, and an availability row's time, must lie in
//   [0, kMaxTraceSeconds] (10 years): a larger one is a unit or typo error (1e300 s would also
//   overflow every sum downstream), refused with one line naming the file, the row and the limit.
// Availability traces (Sailor): a JSON array `[{"Time": s, "GPUs": n}, ...]`, times
//   non-decreasing, the last later than the first (a trace spanning 0 s is refused); the GPUs
//   free to one job from that time until the next row, a whole number in
//   [0, kMaxAvailabilityGpus] (16,384; a larger one is refused naming the file, row and limit).
//   `auto:<trace>` is resolved by the caller with auto_cluster().
// Guarantees: never throws; errors come back as one line naming the file, the line and the fix.
#pragma once

#include <string>
#include <vector>

#include "simulator/availability_replay.h"
#include "simulator/simulator.h"

namespace flotilla::simulator {

struct TraceLoad {
  std::vector<TraceJob> jobs;
  int skipped_rows = 0;
  std::string error;
};

struct ClusterLoad {
  std::vector<SimNode> nodes;
  std::string error;
};

inline constexpr double kMaxTraceSeconds = 10 * 365.25 * 86400;  // 10 years
// GPUs one availability row may offer one job: the largest single training run published
// (Llama 3 405B, 16,384 H100s); Sailor's traces offer at most 16. The replay plans every count
// up to the trace's maximum, so its time grows with it (OPT-350M on A100-40, 2 cores: 16,384
// takes ~12 s, 65,536 ~30 s, as long as the 2^20 a review found); a larger count is refused.
inline constexpr int kMaxAvailabilityGpus = 16384;

struct AvailabilityLoad {
  std::vector<AvailabilityPoint> points;
  std::string error;
};

TraceLoad load_trace(const std::string& path);
AvailabilityLoad load_availability_trace(const std::string& path);
ClusterLoad load_cluster(const std::string& path);

// The default cluster for a trace with no cluster given (documented in docs/simulator.md):
// 8-GPU nodes, enough for the trace's mean GPU demand at `target_load` (GPU-seconds of work per
// second of submission span / target_load), and at least twice its largest job.
std::vector<SimNode> auto_cluster(const std::vector<TraceJob>& jobs, double target_load = 0.6,
                                  int gpus_per_node = 8);

}  // namespace flotilla::simulator
