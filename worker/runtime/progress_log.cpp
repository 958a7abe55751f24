#include "worker/runtime/progress_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace flotilla::worker {
namespace {

void write_whole(int fd, const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // progress is best-effort; training must not die on a full log disk
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

double unix_time_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ProgressLog::ProgressLog(const std::string& path) {
  if (path.empty()) return;
  if (path == "-") {
    fd_ = 1;
    return;
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open progress file '" + path + "': " + std::strerror(errno));
  owns_ = true;
}

ProgressLog::~ProgressLog() {
  if (owns_) ::close(fd_);
}

void ProgressLog::write_line(const std::string& json_object) {
  if (fd_ < 0) return;
  write_whole(fd_, json_object + "\n");
}

LossLog::LossLog(const std::string& path, std::int64_t resume_step) {
  if (path.empty()) return;
  std::string kept;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      long long step = -1;
      if (std::sscanf(line.c_str(), "%lld", &step) == 1 && step < resume_step) kept += line + "\n";
    }
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open loss log '" + path + "': " + std::strerror(errno));
  write_whole(fd_, kept);
}

LossLog::~LossLog() {
  if (fd_ >= 0) ::close(fd_);
}

void LossLog::append(std::int64_t step, double loss) {
  if (fd_ < 0) return;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%lld %a %.17g\n", static_cast<long long>(step), loss, loss);
  write_whole(fd_, buf);
}

}  // namespace flotilla::worker
