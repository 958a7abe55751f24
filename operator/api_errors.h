// How the operator reports a request the API server refused: one log line that names the
// request and, for a 403, the missing permission and where the chart grants it; and a counter.
//
// Guarantees: describe_api_error() is pure. ApiErrorReporter is thread-safe (watch threads and
//   the reconcile worker report through it); it writes a line the first time a request fails and
//   again only when its error changes, so a retried failure does not flood the log, and it counts
//   every failure in flotilla_api_errors_total{kind} (kind: the kube::ErrorKind, a fixed set).
// Assumes: `request` is short and bounded ("list pods", "update trainingjobs/status in team-a").
#pragma once

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "kube/error.h"
#include "operator/metrics.h"

namespace flotilla::op {

// "forbidden: list pods: <server's message> (the operator's ServiceAccount lacks this RBAC
// permission: ...)" — the hint only for 401/403.
std::string describe_api_error(const std::string& request, const kube::Error& error);

class ApiErrorReporter {
 public:
  explicit ApiErrorReporter(Metrics& metrics, std::FILE* log = stderr) : metrics_(metrics), log_(log) {}
  void report(const std::string& request, const kube::Error& error);
  // The request worked again: its next failure is logged even if the same.
  void recovered(const std::string& request);

 private:
  Metrics& metrics_;
  std::FILE* log_;
  std::mutex mu_;
  std::map<std::string, std::string> last_logged_;  // request -> the error line last written
};

}  // namespace flotilla::op
