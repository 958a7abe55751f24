// The `flotilla` command table.
//
// Guarantees: every cmd_<name>.cpp registers one Command at static-initialisation time;
//   main() dispatches argv[1] to it and prints the table for --help or an unknown name.
// Assumes: command names are unique (a duplicate aborts at start-up, which a test would catch).
// Caveats: run() owns its own argument parsing and error messages; it returns the exit code
//   (0 ok, 1 the request could not be satisfied, 2 bad usage) and must not throw.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace flotilla::cli {

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

const std::vector<Command>& commands();

// Prints "<command>: <line>" on stderr and returns 2, the exit code of bad usage, e.g.
// `return usage_error("flotilla plan", "--model is required");`.
int usage_error(const std::string& command, const std::string& line);

struct CommandRegistrar {
  explicit CommandRegistrar(Command command);
};

}  // namespace flotilla::cli
