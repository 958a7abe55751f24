// The wire contract between the operator and each worker pod's trainer sidecar: three pod
// annotations, each one JSON object.
//
//   flotilla.io/plan        (written by the operator)  what this pod runs under epoch N: the
//                           job's layout, this pod's global ranks, and the barrier epoch from
//                           which its workers may start;
//   flotilla.io/report      (written by the pod's sidecar) what the pod is doing: state, epoch,
//                           step, loss, tokens/s, last checkpoint, measured stage times;
//   flotilla.io/rendezvous  (written by the sidecar of the pod holding global rank 0) the
//                           address and port rank 0 listens on for one epoch.
//
// Why annotations: the plan of a running pod must change in place (a pod is one node's share
// of the job and keeps its GPUs across rescales; environment variables cannot change), and the
// operator already watches its pods, so a report wakes the job's reconcile with no extra
// resource or port (docs/sidecar.md).
//
// Guarantees: encode_*() and parse_*() are inverses; parse_*() refuses, with one line naming
//   the field, anything malformed (not JSON, a missing field, a wrong type, a count below 1, a
//   rank outside the world, a barrier beyond the epoch), so a sidecar never acts on half a plan.
// Assumes: for workerKind flotilla, ranks are the reference worker's numbering (rank r: stage
//   r % pp, replica r / pp; worker/runtime/layout.h); partition uses the worker's
//   "first:end,..." unit ranges. For workerKind megatron, ranks are Megatron-LM's (tp-dp-pp
//   order, launch/megatron.h): a pod is one torchrun agent over consecutive ranks starting at a
//   multiple of their count (parse refuses anything else), so node rank = ranks[0] / count and
//   nnodes = worldSize / count; megatronArgs is the script and its flags.
// Caveats: pure (no I/O, no clock); the reader decides what to do with a stale epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace flotilla {

inline constexpr const char* kPlanAnnotation = "flotilla.io/plan";
inline constexpr const char* kReportAnnotation = "flotilla.io/report";
inline constexpr const char* kRendezvousAnnotation = "flotilla.io/rendezvous";
inline constexpr const char* kJobLabel = "flotilla.io/job";  // pod label: the TrainingJob's name

struct PodPlan {
  std::string job;  // "<namespace>/<name>"
  std::int64_t epoch = 0;
  std::int64_t barrier = 0;  // workers may start once barrier == epoch
  std::string worker_kind = "flotilla";
  std::string model;  // a preset name of the reference worker
  std::int64_t seed = 1234;
  int global_batch_size = 1;
  int micro_batch_size = 1;
  // The worker's V: fixed for the job's life (the largest DP it may reach); any DP dividing it
  // gives the same bits (worker/runtime/data_loader.h).
  int virtual_shards = 1;
  std::int64_t train_steps = 1;
  int world_size = 1;
  int pp = 1;
  int dp = 1;
  int tp = 1;
  std::string partition;  // "0:2,2:4": per stage [first unit, end unit)
  std::string data_path;
  std::string checkpoint_dir;
  std::int64_t checkpoint_every_steps = 0;
  std::string loss_log;
  std::vector<int> ranks;                  // this pod's global ranks, in local-rank order
  std::string rendezvous_pod;              // the pod whose sidecar publishes the rendezvous address
  std::vector<std::string> megatron_args;  // worker_kind megatron: the script, then its Megatron flags
  // Local restarts in a row without progress before the sidecar gives up (the job's
  // spec.backoffLimit); absent: the sidecar's --max-restarts.
  std::optional<int> max_local_restarts;
  // Seconds the sidecar waits for stopped workers before SIGKILL (spec.worker.stopGracePeriodSeconds);
  // absent: the sidecar's default (20 s).
  std::optional<int> stop_grace_seconds;
};

enum class PodState { kWaiting, kStarting, kRunning, kStopping, kStopped, kSucceeded, kFailed, kDegraded };
const char* to_string(PodState state);
std::optional<PodState> parse_pod_state(std::string_view text);

// Measured seconds of one pipeline stage per micro-batch (online profiling).
struct StageSeconds {
  int stage = 0;
  double forward_s = 0;
  double backward_s = 0;
};

struct PodReport {
  std::int64_t epoch = 0;
  PodState state = PodState::kWaiting;
  std::int64_t step = 0;  // last completed optimizer step (0: none)
  double loss = 0;
  double tokens_per_second = 0;
  std::int64_t last_checkpoint_step = -1;  // newest complete checkpoint (-1: none)
  std::vector<StageSeconds> stage_seconds;
  int restarts = 0;     // worker restarts under this epoch (crash recovery)
  std::int64_t peak_bytes = 0;  // measured peak memory of the pod's busiest rank (0: not measured)
  std::string message;  // one line: why Failed/Degraded, else empty
  std::string time;     // RFC 3339, when the sidecar wrote it
};

struct Rendezvous {
  std::int64_t epoch = 0;
  std::string addr;
  int port = 0;
};

std::string encode_pod_plan(const PodPlan& plan);
std::variant<PodPlan, std::string> parse_pod_plan(std::string_view json_text);

// The fields in which `wanted` differs from the plan a pod's workers were `launched` with,
// epoch and barrier aside, each as "trainSteps: 500 -> 900" (wire names, JSON values), by
// name; empty when the workers run what is wanted. The operator relaunches on any difference:
// workers take these only at launch. A field `launched` does not carry (an older operator's
// plan, without the newer optional fields) is no difference: its sidecar ran the default, and
// an operator upgrade must not relaunch every running job.
std::vector<std::string> launch_differences(const PodPlan& launched, const PodPlan& wanted);

std::string encode_pod_report(const PodReport& report);
std::variant<PodReport, std::string> parse_pod_report(std::string_view json_text);

std::string encode_rendezvous(const Rendezvous& rendezvous);
std::variant<Rendezvous, std::string> parse_rendezvous(std::string_view json_text);

}  // namespace flotilla
