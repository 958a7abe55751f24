#include "process/fork_call.h"

#include <unistd.h>

#include <cerrno>
#include <new>
#include <system_error>

namespace flotilla::process {

Child fork_call(const std::function<int()>& fn, const ForkCallOptions& options) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) {
    if (options.own_group) ::setpgid(0, 0);
    for (const auto& [resource, value] : options.rlimits) {
      rlimit lim{value, value};
      ::setrlimit(resource, &lim);
    }
    int code = 0;
    try {
      code = fn();
    } catch (const std::bad_alloc&) {
      code = 3;
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  if (options.own_group) ::setpgid(pid, pid);
  return Child(pid, options.own_group ? pid : 0);
}

}  // namespace flotilla::process
