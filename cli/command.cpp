#include "cli/command.h"

#include <cstdio>
#include <cstdlib>

namespace flotilla::cli {

namespace {
std::vector<Command>& table() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace

const std::vector<Command>& commands() { return table(); }

int usage_error(const std::string& command, const std::string& line) {
  std::fprintf(stderr, "%s: %s\n", command.c_str(), line.c_str());
  return 2;
}

CommandRegistrar::CommandRegistrar(Command command) {
  for (const auto& c : table()) {
    if (c.name == command.name) {
      std::fprintf(stderr, "flotilla: command '%s' registered twice\n", command.name.c_str());
      std::abort();
    }
  }
  table().push_back(std::move(command));
}

}  // namespace flotilla::cli
