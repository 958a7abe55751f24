#include "process/self_executable.h"

#include <unistd.h>

#include <climits>
#include <stdexcept>

namespace flotilla::process {

std::string self_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace flotilla::process
