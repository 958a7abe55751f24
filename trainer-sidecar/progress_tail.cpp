#include "trainer-sidecar/progress_tail.h"

#include <fcntl.h>
#include <unistd.h>

namespace flotilla::sidecar {

std::vector<std::string> ProgressTail::read_new_lines() {
  std::vector<std::string> lines;
  if (path_.empty()) return lines;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  constexpr std::size_t kMaxBytes = 4u << 20;
  std::string buf(64 * 1024, '\0');
  std::size_t total = 0;
  while (total < kMaxBytes) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(offset_));
    if (n <= 0) break;
    offset_ += static_cast<std::uint64_t>(n);
    total += static_cast<std::size_t>(n);
    partial_.append(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  std::size_t start = 0;
  for (std::size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(partial_.substr(start, nl - start));
  partial_.erase(0, start);
  return lines;
}

}  // namespace flotilla::sidecar
