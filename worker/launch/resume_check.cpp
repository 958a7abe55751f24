#include "worker/launch/resume_check.h"

#include "worker/launch/checkpoint_folder.h"

namespace flotilla::worker {
namespace {

using json = nlohmann::json;

// One line naming the first field that differs, or "" when equal.
std::string first_difference(const std::string& section, const json& saved, const json& now) {
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!saved.contains(it.key()))
      return section + "." + it.key() + " is missing in the checkpoint";
    if (saved[it.key()] != it.value())
      return section + "." + it.key() + " is " + saved[it.key()].dump() +
             " in the checkpoint but " + it.value().dump() + " in this job";
  }
  return {};
}

}  // namespace

// The fields resume() reads, with their types: a hand-edited or damaged meta.json is named as
// such here rather than surfacing as a JSON library exception in a rank.
std::string meta_structure_error(const json& meta, std::int64_t folder_step,
                                 const std::filesystem::path& folder) {
  const std::string corrupt = "checkpoint '" + folder.string() + "' has a corrupt meta.json: ";
  const std::string fix = "; delete that folder to fall back to the previous one";
  const auto step = meta.find("step");
  if (step == meta.end() || !step->is_number_integer() || step->get<std::int64_t>() != folder_step)
    return corrupt + "\"step\" is " + (step == meta.end() ? "missing" : step->dump()) +
           ", the folder is step " + std::to_string(folder_step) + fix;
  const auto units = meta.find("units");
  if (units == meta.end() || !units->is_array())
    return corrupt + "\"units\" is not a list of unit files" + fix;
  for (std::size_t i = 0; i < units->size(); ++i) {
    const json& u = (*units)[i];
    const bool ok = u.is_object() && u.contains("unit") && u["unit"].is_number_unsigned() &&
                    u["unit"].get<std::uint64_t>() == i && u.contains("file") &&
                    u["file"].is_string() && u.contains("bytes") &&
                    u["bytes"].is_number_unsigned() && u.contains("crc32") &&
                    u["crc32"].is_number_unsigned() &&
                    u["crc32"].get<std::uint64_t>() <= 0xffffffffULL &&
                    u.contains("param_count") && u["param_count"].is_number_unsigned();
    if (!ok)
      return corrupt + "units[" + std::to_string(i) + "] is not {unit: " + std::to_string(i) +
             ", file, bytes, crc32, param_count}" + fix;
  }
  return {};
}

std::string resume_compatibility_error(const json& meta, const ResumeIdentity& job,
                                       const std::filesystem::path& folder,
                                       std::int64_t folder_step) {
  const std::string fix =
      "; resume with the same model and batch settings, or start fresh "
      "in another folder (--checkpoint-dir; a TrainingJob's spec.checkpoint.path)";
  if (!meta.is_object() || !meta.contains("format") ||
      meta["format"] != "flotilla-worker-checkpoint/1")
    return "checkpoint '" + folder.string() +
           "' is not a flotilla-worker checkpoint (no \"format\": "
           "\"flotilla-worker-checkpoint/1\" in meta.json); delete that folder or start fresh with "
           "another folder (--checkpoint-dir; a TrainingJob's spec.checkpoint.path)";
  if (auto e = meta_structure_error(meta, folder_step, folder); !e.empty()) return e;
  if (auto d = first_difference("model", meta.value("model", json::object()), job.model);
      !d.empty())
    return "checkpoint '" + folder.string() + "' does not match this job: " + d + fix;
  if (auto d = first_difference("training", meta.value("training", json::object()), job.training);
      !d.empty())
    return "checkpoint '" + folder.string() + "' does not match this job: " + d + fix;
  const json& units = meta.value("units", json::array());
  if (units.size() != static_cast<std::size_t>(job.num_units))
    return "checkpoint '" + folder.string() + "' lists " + std::to_string(units.size()) +
           " unit files, the model has " + std::to_string(job.num_units) + fix;
  return {};
}

std::string check_resume_compatibility(const std::filesystem::path& checkpoint_dir,
                                       const ResumeIdentity& job) {
  auto ref = find_latest_complete(checkpoint_dir);
  if (!ref) return {};
  json meta;
  try {
    meta = json::parse(read_meta(ref->folder));
  } catch (const std::exception& e) {
    return "checkpoint '" + ref->folder.string() + "' has a corrupt meta.json (" + e.what() +
           "); delete that folder to fall back to the previous one";
  }
  return resume_compatibility_error(meta, job, ref->folder, ref->step);
}

}  // namespace flotilla::worker
