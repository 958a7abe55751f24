// Path of the running binary, so a launcher can start copies of itself.
//
// Guarantees: the target of /proc/self/exe, read once per call.
// Assumes: Linux /proc. Caveats: if the binary was replaced on disk, the path names the new one.
#pragma once

#include <string>

namespace flotilla::process {

// Throws std::runtime_error when /proc/self/exe cannot be read.
std::string self_executable();

}  // namespace flotilla::process
