// The status kube-controller-manager's disruption controller writes on a PodDisruptionBudget,
// computed from the pods its selector picks.
//
// Guarantees: expectedPods = the selected pods that are not finished or terminating;
//   currentHealthy = those that are Ready; desiredHealthy = minAvailable (an int, or a
//   percentage of expectedPods rounded up) or expectedPods - maxUnavailable (a percentage
//   rounded up, as Kubernetes does), never below 0; disruptionsAllowed = currentHealthy -
//   desiredHealthy when positive; observedGeneration; condition DisruptionAllowed (True
//   SufficientPods / False InsufficientPods).
// Assumes: pods are in the PDB's namespace.
// Caveats: pure; no eviction API (nothing consumes disruptionsAllowed), disruptedPods is never set.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flotilla::devcluster {

nlohmann::json pdb_status(const nlohmann::json& pdb, const std::vector<nlohmann::json>& pods_in_namespace,
                          const std::string& now_rfc3339);

}  // namespace flotilla::devcluster
