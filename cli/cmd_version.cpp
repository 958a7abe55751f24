#include <cstdio>

#include "cli/command.h"

namespace {
const flotilla::cli::CommandRegistrar version_command{{
    "version", "print the version",
    [](const std::vector<std::string>&) {
      std::printf("flotilla 0.1.0\n");
      return 0;
    }}};
}  // namespace
