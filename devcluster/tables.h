// Server-side printing: meta.k8s.io/v1 Table responses for `kubectl get`.
//
// Guarantees: the columns of built-in types follow kube-apiserver's printers closely enough
//   for kubectl's default output (pods: Name Ready Status Restarts Age, wide: IP Node; nodes:
//   Name Status Roles Age Version; ...); custom resources use their additionalPrinterColumns
//   (date columns shown as ages), or Name + Age without any.
// Assumes: objects are stored JSON; now_unix is the current time in seconds.
// Caveats: rows carry PartialObjectMetadata unless includeObject=Object asks for the object.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devcluster/registry.h"

namespace flotilla::devcluster {

nlohmann::json table_columns(const ResourceType& type);
nlohmann::json table_row(const ResourceType& type, const nlohmann::json& object, long long now_unix,
                         const std::string& include_object);
// A whole Table from a list of objects.
nlohmann::json make_table(const ResourceType& type, const std::vector<const nlohmann::json*>& objects,
                          const std::string& resource_version, const std::string& continue_token,
                          const std::string& include_object, bool with_columns = true);

}  // namespace flotilla::devcluster
