// The command line of a training job, shared by `flotilla-worker run`, `relaunch` and `rank`.
//
// Guarantees: parse_job_options() returns options whose model, batch geometry and layout are
//   all valid, or a one-line error naming the flag and what to fix (impossible layouts, batch
//   sizes that do not divide, unknown presets, missing values, counts below 1 even for flags
//   that have a derived default, non-finite numbers, a non-positive --lr). to_args() renders options back
//   to flags that parse to the same options (the launcher passes them to each rank).
// Assumes: flags are "--name value" pairs.
// Caveats: does not touch the file system; the data file and checkpoints are checked later.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "worker/model/config.h"
#include "worker/runtime/data_loader.h"
#include "worker/runtime/layout.h"

namespace flotilla::worker {

struct JobOptions {
  int world_size = 1;     // ranks in the job, pp * dp
  int pp = 1;             // pipeline stages
  int dp = 1;             // data-parallel replicas of each stage
  std::string partition;  // "" = even split
  std::string model_name = "small";  // the preset --model names (its sizes may be overridden)
  GPTConfig model;                   // the preset with --layers/--hidden/--heads/--seq-len applied
  TrainConfig train;
  BatchGeometry geometry;
  std::string data_path;    // token file, read by every rank
  std::int64_t steps = 10;  // total optimizer steps of the job (a resumed run stops there too)
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;  // 0: only on stop and at the end
  int keep = 3;                       // complete checkpoints kept on disk; older ones are deleted
  std::string loss_log;  // "" = none
  std::string progress;  // "" = none, "-" = stdout, else a file every rank appends to
  std::string backend = "cpu";  // "cpu", "cuda" or "cuda-tf32" (see worker/model/backend.h)
  // How stages and replicas exchange tensors: "tcp" (host memory over the TCP transport),
  // "nccl" (GPU buffers over NCCL; CUDA backends only) or "auto" (nccl for a CUDA backend
  // when this build has NCCL, else tcp). See runtime/nccl_communicator.h.
  std::string comm = "auto";
  // Transport limits in seconds; 0 = FLOTILLA_RECV_TIMEOUT_S / FLOTILLA_CONNECT_TIMEOUT_S or
  // the defaults (300 s per receive, 60 s per rendezvous step). See tcp_transport.h.
  double recv_timeout_s = 0;
  double connect_timeout_s = 0;
  Layout layout;
};

std::variant<JobOptions, std::string> parse_job_options(const std::vector<std::string>& args);
std::vector<std::string> to_args(const JobOptions& options);
std::string job_usage();

}  // namespace flotilla::worker
