// Finding checkpoints on disk without reading their tensors: the step folders under a
// checkpoint root, which of them are complete, and their meta.json text.
// Split from runtime/checkpoint.h so the launch sequence (start_job.h) links without the
// trainer; checkpoint.h includes this header, so its users see no change.
//
// Guarantees: a folder counts as a checkpoint only when its name is step_<8 digits> and it
//   holds DONE (written last); find_latest_complete() returns the highest such step.
// Assumes: the layout written by runtime/checkpoint.cpp (see there).
// Caveats: read_meta() throws std::runtime_error (one line naming the folder) when meta.json
//   cannot be read; it does not parse it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace flotilla::worker {

std::filesystem::path step_folder(const std::filesystem::path& root, std::int64_t step);
// The step of a folder name "step_00000012", or nullopt for any other name.
std::optional<std::int64_t> parse_step_folder(const std::string& name);

bool is_complete(const std::filesystem::path& folder);

struct CheckpointRef {
  std::int64_t step = 0;
  std::filesystem::path folder;
};
// Newest step folder under root that has DONE; nullopt when there is none.
std::optional<CheckpointRef> find_latest_complete(const std::filesystem::path& root);

std::string read_meta(const std::filesystem::path& folder);

}  // namespace flotilla::worker
