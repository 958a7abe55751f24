// Where a rank reports progress: JSON lines (one object per line) and the loss log.
//
// Guarantees:
//   - ProgressLog appends each line with one write() on an O_APPEND descriptor, so the lines
//     of several ranks sharing one file never interleave mid-line. "-" means stdout.
//   - LossLog writes "<step> <loss as C99 hex float> <loss as %.17g>" per optimizer step, so
//     two runs compare bit-for-bit with diff. Opening it for a resumed run first drops the
//     lines of steps >= the resume step (they were lost with the killed run and are redone).
// Assumes: one writer of the loss log (global rank 0).
#pragma once

#include <cstdint>
#include <string>

namespace flotilla::worker {

class ProgressLog {
 public:
  explicit ProgressLog(const std::string& path);  // "" = discard
  ~ProgressLog();
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;
  void write_line(const std::string& json_object);

 private:
  int fd_ = -1;
  bool owns_ = false;
};

class LossLog {
 public:
  LossLog(const std::string& path, std::int64_t resume_step);  // "" = discard
  ~LossLog();
  LossLog(const LossLog&) = delete;
  LossLog& operator=(const LossLog&) = delete;
  void append(std::int64_t step, double loss);

 private:
  int fd_ = -1;
};

// Wall clock in milliseconds since the Unix epoch (timestamps for cross-process timing).
double unix_time_ms();

}  // namespace flotilla::worker
