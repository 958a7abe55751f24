// Reading the lines the workers append to one progress file, as they arrive.
//
// Guarantees: read_new_lines() returns each complete line (ending in '\n') once, in file
//   order; a partly written last line is kept until its newline arrives. A missing file is no
//   lines (the workers have not created it yet).
// Assumes: the file only grows (the worker appends with O_APPEND, one write per line).
// Caveats: reads at most 4 MiB per call; the rest comes on the next call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::sidecar {

class ProgressTail {
 public:
  ProgressTail() = default;
  explicit ProgressTail(std::string path) : path_(std::move(path)) {}
  std::vector<std::string> read_new_lines();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace flotilla::sidecar
