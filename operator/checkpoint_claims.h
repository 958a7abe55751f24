// Which TrainingJob a checkpoint folder belongs to when several name the same one.
//
// Two jobs writing one folder overwrite each other's checkpoints and loss log, and the later one
// silently resumes from the earlier one's steps (a new-user run lost 57 lines of a loss log this
// way). So a folder belongs to the job that named it first: the earliest creationTimestamp, then
// the smaller "<namespace>/<name>". A later job that names it is not admitted until it names its
// own folder or the owner is deleted (deleting a job and applying it again, same name, resumes
// from its checkpoints: the new object is the only claimant).
//
// Guarantees: pure; owner_of() names another job only when that job claims the same folder and
//   comes first in that order; jobs being deleted claim nothing.
// Assumes: a folder is the same storage for every job that names it when no pod volume is given
//   (checkpoint.path must then be a path every node shares); with spec.checkpoint.volume it is
//   that volume, per namespace (a PersistentVolumeClaim is namespaced), at that path.
// Caveats: nested folders (one job's path inside another's) are not compared; two namespaces
//   that mount one network file system through volumes of their own are not either.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "operator/job_spec.h"

namespace flotilla::op {

// The storage and folder a job's checkpoints go to, as a comparable string.
std::string checkpoint_claim(const std::string& ns, const std::string& path, const nlohmann::json& volume);

class CheckpointClaims {
 public:
  // A TrainingJob object of the cache, read field by field (no full spec parse: the snapshot
  // adds every job on each rebuild); one without a string checkpoint.path claims nothing.
  void add(const nlohmann::json& job);
  // The key of the job `spec`'s folder belongs to when that is another job, else "".
  std::string owner_of(const JobSpec& spec) const;
  // The first other job that names `spec`'s folder, before or after it, else "": a running job
  // may not move into a folder another job names, whichever came first.
  std::string other_claimant(const JobSpec& spec) const;

 private:
  using Order = std::pair<std::string, std::string>;  // creationTimestamp (RFC 3339), key
  std::map<std::string, std::set<Order>> claimants_;  // claim -> its claimants, first first
};

}  // namespace flotilla::op
