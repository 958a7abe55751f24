// Can the newest checkpoint in a folder resume this job? The check a launcher runs before it
// starts any rank, on meta.json alone (no tensors, no trainer).
//
// Guarantees: empty string when the folder has no complete checkpoint or its meta.json
//   matches; else one line naming the checkpoint and the first mismatch and what to do:
//   a meta.json that is not a flotilla-worker checkpoint, or is structurally damaged ("step"
//   not matching its folder, "units" not one typed entry per unit file), or whose "model" /
//   "training" sections differ from the job's (every key the job has must be equal), or whose
//   unit count differs.
// Assumes: the identity is built the way the writer builds meta.json's "model" and "training"
//   sections (the worker's resume_identity(JobOptions), trainer.h); a sidecar passes the
//   identity of the job it launches.
// Caveats: the ranks check again when they load (trainer.cpp), so this is the early, clean
//   refusal (exit 2 before any rank starts), not the only line of defence.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace flotilla::worker {

struct ResumeIdentity {
  nlohmann::json model = nlohmann::json::object();     // meta.json "model"
  nlohmann::json training = nlohmann::json::object();  // meta.json "training"
  int num_units = 0;                                   // L + 2
};

// The structural part alone (what the ranks' loader reads), for any job.
std::string meta_structure_error(const nlohmann::json& meta, std::int64_t folder_step,
                                 const std::filesystem::path& folder);
// meta.json of the checkpoint at `folder` (step folder_step) against the job's identity.
std::string resume_compatibility_error(const nlohmann::json& meta, const ResumeIdentity& job,
                                       const std::filesystem::path& folder,
                                       std::int64_t folder_step);
// The newest complete checkpoint under checkpoint_dir (if any) against the job's identity.
std::string check_resume_compatibility(const std::filesystem::path& checkpoint_dir,
                                       const ResumeIdentity& job);

}  // namespace flotilla::worker
