// Reading Sailor's profiles from disk: <dir>/<model>/<gpu>/profile.json.
//
// Guarantees: one clear line on a missing directory or malformed file; unreadable individual
//   profiles are reported, not skipped silently; a profile whose <model> folder names a preset
//   but whose block count is not that preset's (profile_block_mismatch()) is refused.
// Assumes: JSON {mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}.
#pragma once

#include <string>
#include <string_view>

#include "planner/profile.h"
#include "planner/result.h"

namespace flotilla::planner {

Result<GpuProfile> parse_profile_json(std::string_view text, std::string model, std::string gpu);
Result<ProfileSet> load_profile_dir(const std::string& dir);

}  // namespace flotilla::planner
