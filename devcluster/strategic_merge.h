// Strategic merge patch for the core fields devcluster serves (pods, services, nodes, and
// metadata of everything).
//
// Guarantees: maps merge recursively and null deletes a key (as in JSON merge patch); lists
//   with a known merge key merge element by element (containers/initContainers/env/volumes/
//   imagePullSecrets by name, volumeMounts by mountPath, container ports by containerPort,
//   service ports by port, conditions by type, ownerReferences by uid); finalizers merge as a
//   set; `$patch: delete|replace`, `$deleteFromPrimitiveList/<field>` and
//   `$setElementOrder/<field>` directives are honoured or dropped as kubectl expects.
// Assumes: the patch is what kubectl/client-go produce for these types.
// Caveats: merge keys are looked up by field name, not by the full OpenAPI schema; other lists
//   are replaced wholesale. Custom resources must use JSON merge or JSON patch (415 otherwise).
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace flotilla::devcluster {

nlohmann::json strategic_merge_patch(const nlohmann::json& original, const nlohmann::json& patch);

}  // namespace flotilla::devcluster
