// Where Flotilla finds the shared, measured data (Sailor profiles, Megatron runs, traces).
//
// Guarantees: data_dir() returns $FLOTILLA_DATA when set, else the build's default
//   (<source>/../shared/data); it never returns a path that does not exist.
// Assumes: the data is read-only and never copied into the repository.
// Caveats: this is I/O (it reads the environment and the file system), so it belongs to the
//   shells and the tests, never to the pure core, which takes paths or parsed data as arguments.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace flotilla {

// The data root, or nullopt when neither $FLOTILLA_DATA nor the default exists.
std::optional<std::filesystem::path> data_dir();

// data_dir() / relative, or nullopt when that file or folder is absent.
std::optional<std::filesystem::path> data_path(const std::string& relative);

// One line for a skipped test or a refused command: which path was missing and how to fix it.
std::string data_missing_message(const std::string& relative);

}  // namespace flotilla
