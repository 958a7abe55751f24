#include "operator/checkpoint_claims.h"

#include <filesystem>

#include "kube/object.h"

namespace flotilla::op {

using Json = nlohmann::json;

std::string checkpoint_claim(const std::string& ns, const std::string& path, const Json& volume) {
  std::string folder = std::filesystem::path(path).lexically_normal().string();
  if (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  return volume.is_object() ? ns + " " + volume.dump() + " " + folder : folder;
}

void CheckpointClaims::add(const Json& job) {
  const Json meta = job.value("metadata", Json::object());
  if (!meta.is_object() || meta.contains("deletionTimestamp")) return;
  const Json spec = job.value("spec", Json::object());
  const Json checkpoint = spec.is_object() ? spec.value("checkpoint", Json::object()) : Json::object();
  const std::string path = kube::string_field(checkpoint, "path");
  if (path.empty()) return;
  std::string ns = kube::object_namespace(job);
  if (ns.empty()) ns = "default";  // as parse_job_spec() reads it
  const Order order{kube::string_field(meta, "creationTimestamp"), ns + "/" + kube::object_name(job)};
  const Json volume = checkpoint.is_object() ? checkpoint.value("volume", Json()) : Json();
  claimants_[checkpoint_claim(ns, path, volume)].insert(order);
}

std::string CheckpointClaims::owner_of(const JobSpec& spec) const {
  auto it = claimants_.find(checkpoint_claim(spec.ns, spec.checkpoint_path, spec.checkpoint_volume));
  if (it == claimants_.end()) return "";
  const Order& first = *it->second.begin();
  return first < Order{spec.creation_timestamp, spec.key()} && first.second != spec.key() ? first.second : "";
}

std::string CheckpointClaims::other_claimant(const JobSpec& spec) const {
  auto it = claimants_.find(checkpoint_claim(spec.ns, spec.checkpoint_path, spec.checkpoint_volume));
  if (it == claimants_.end()) return "";
  for (const Order& o : it->second)
    if (o.second != spec.key()) return o.second;
  return "";
}

}  // namespace flotilla::op
