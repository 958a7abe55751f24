// Sharded, atomic, resharding-friendly checkpoints.
//
// On disk (one folder per completed step):
//   <root>/step_00000012/unit_0000.bin ... unit_<L+1>.bin   one file per model unit
//   <root>/step_00000012/meta.json                          step, data position, RNG, config,
//                                                           writing layout, per-file CRC32
//   <root>/step_00000012/DONE                               written last, after all ranks
// A unit file is: magic "FLOTUNIT", u32 version (1), u32 unit index, u64 parameter count n,
//   then n float32 parameters, n float32 AdamW m, n float32 AdamW v (little-endian host order).
//
// Guarantees:
//   - Every file is written to a temporary name, fsync'd and renamed; the folder is fsync'd.
//     A folder without DONE is never loaded (find_latest_complete skips it), so a crash or
//     SIGKILL mid-write loses at most this checkpoint, never an earlier one.
//   - Files are keyed by unit index, not by stage or rank, so any layout (PP, DP, partition)
//     can load a checkpoint written by any other: that remap is the resharding.
//   - read_unit_file() verifies size and CRC32 and throws a one-line error naming the file.
// Assumes: a POSIX file system where rename() within a folder is atomic.
// Caveats: floats are stored in host byte order (all supported hosts are little-endian).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "worker/launch/checkpoint_folder.h"  // step_folder, find_latest_complete, read_meta

namespace flotilla::worker {

struct UnitFileInfo {
  int unit = 0;
  std::string file;  // name inside the step folder
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t param_count = 0;
};

struct UnitState {
  std::vector<float> params, m, v;
};

// Writes one unit file atomically into `folder` (created if needed).
UnitFileInfo write_unit_file(const std::filesystem::path& folder, int unit,
                             std::span<const float> params, std::span<const float> m,
                             std::span<const float> v);

// Writes meta.json, then DONE, each atomically, and fsyncs the folder. Call once, after every
// unit file of the step is durable.
void write_meta_and_done(const std::filesystem::path& folder, const std::string& meta_json);

// Reads and verifies one unit file against what meta.json recorded.
UnitState read_unit_file(const std::filesystem::path& folder, const UnitFileInfo& expected);

// Deletes all but the newest `keep` complete checkpoints, and incomplete folders older than
// the newest complete one (leftovers of killed writers).
void prune_checkpoints(const std::filesystem::path& root, int keep);

// Test hook: FLOTILLA_TEST_CKPT_PAUSE="<step>:<files>:<ms>" makes the writer sleep <ms> after
// its <files>-th unit file of the checkpoint at <step>, so a test can SIGKILL it mid-write.
// A stop request (SIGTERM) ends the pause early.
void maybe_pause_for_test(std::int64_t step, int files_written);

}  // namespace flotilla::worker
