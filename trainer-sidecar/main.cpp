// flotilla-sidecar: the trainer sidecar of one worker pod (docs/sidecar.md).
#include <cstdio>
#include <string>
#include <vector>

#include "trainer-sidecar/options.h"
#include "trainer-sidecar/sidecar_loop.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = flotilla::sidecar::parse_options(args);
  if (auto* e = std::get_if<std::string>(&parsed)) {
    std::fprintf(stderr, "flotilla-sidecar: error: %s\n", e->c_str());
    return 2;
  }
  const auto& options = std::get<flotilla::sidecar::Options>(parsed);
  if (options.version) {
    std::printf("flotilla-sidecar %s\n", FLOTILLA_VERSION);
    return 0;
  }
  return flotilla::sidecar::run_sidecar(options);
}
