#include "operator/api_errors.h"

#include <cctype>

namespace flotilla::op {

std::string describe_api_error(const std::string& request, const kube::Error& error) {
  std::string kind(kube::to_string(error.kind));
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string line = kind + ": " + request;
  if (error.http_status != 0) line += " (HTTP " + std::to_string(error.http_status) + ")";
  if (!error.message.empty()) line += ": " + error.message;
  if (error.kind == kube::ErrorKind::Forbidden)
    line += " — the operator's ServiceAccount lacks this RBAC permission; the Helm chart's ClusterRole "
            "and Roles grant exactly what the operator sends (docs/install.md, RBAC)";
  else if (error.kind == kube::ErrorKind::Unauthorized)
    line += " — the API server does not accept the operator's credentials (token expired or revoked?)";
  return line;
}

void ApiErrorReporter::report(const std::string& request, const kube::Error& error) {
  metrics_.inc("flotilla_api_errors_total", {{"kind", std::string(kube::to_string(error.kind))}});
  const std::string line = describe_api_error(request, error);
  std::lock_guard lock(mu_);
  std::string& last = last_logged_[request];
  if (last == line) return;
  last = line;
  std::fprintf(log_, "flotilla-operator: %s\n", line.c_str());
  std::fflush(log_);
}

void ApiErrorReporter::recovered(const std::string& request) {
  std::lock_guard lock(mu_);
  last_logged_.erase(request);
}

}  // namespace flotilla::op
