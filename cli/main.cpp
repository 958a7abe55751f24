#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"

namespace {
void usage(FILE* out) {
  std::fprintf(out, "usage: flotilla <command> [options]\n\ncommands:\n");
  auto sorted = flotilla::cli::commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& c : sorted) std::fprintf(out, "  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out, "\nRun 'flotilla <command> --help' for a command's options.\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : flotilla::cli::commands()) {
    if (c.name != name) continue;
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      // Commands report their own errors; this is the last line of defence against a crash.
      std::fprintf(stderr, "flotilla %s: internal error: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "flotilla: unknown command '%s'\n\n", name.c_str());
  usage(stderr);
  return 2;
}
