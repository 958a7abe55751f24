// The local harness behind `flotilla up` / `flotilla down` (and the demo and e2e tests): a
// devcluster with virtual GPU nodes, the TrainingJob CRD, and the operator, as real processes
// whose pods run the locally built sidecar and worker.
//
// Guarantees: up() returns only when the API server answers, the CRD is established and the
//   operator reports ready (/readyz), or a one-line error naming the part that failed and its log
//   (<dir>/devcluster.log, <dir>/operator.log); on failure it stops what it started. It writes
//   <dir>/kubeconfig and <dir>/flotilla-up.json (pids with start times, ports). down() stops the
//   operator, then devcluster (which stops every pod), SIGKILL after a grace, and only signals
//   processes whose start time matches the record (a reused pid is left alone).
// Assumes: the binaries sit in this build tree (or beside `flotilla`, or on PATH).
#pragma once

#include <string>

namespace flotilla::cli {

struct UpOptions {
  std::string nodes_file;
  std::string dir;
  bool benefit_check = true;
  std::string gpu_catalog;  // optional override file for the operator and devcluster's emulated types
  double arrival_window_s = 0;    // 0: the operator's default
  double restart_overhead_s = 0;  // 0: the operator's default
};

struct UpResult {
  bool ok = false;
  std::string error;
  std::string kubeconfig;
  int metrics_port = 0;
  int devcluster_pid = 0;
  int operator_pid = 0;
};

UpResult local_up(const UpOptions& options);
// 0 when everything recorded in <dir> is stopped; the error line otherwise.
std::string local_down(const std::string& dir);
// The path of a program of this build: beside `flotilla`, in the build tree, or on PATH.
std::string find_program(const std::string& name, const std::string& build_subdir);

}  // namespace flotilla::cli
