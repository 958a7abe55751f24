#include "worker/runtime/data_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace flotilla::worker {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::string BatchGeometry::validate() const {
  if (global_batch <= 0 || micro_batch <= 0 || virtual_shards <= 0)
    return "global batch, micro-batch and virtual shards must be positive";
  if (global_batch % virtual_shards != 0)
    return "global batch " + std::to_string(global_batch) + " is not divisible by " +
           std::to_string(virtual_shards) + " virtual shards; pick --virtual-shards dividing it";
  if (samples_per_shard() % micro_batch != 0)
    return "each virtual shard holds " + std::to_string(samples_per_shard()) +
           " samples, not divisible by micro-batch " + std::to_string(micro_batch) +
           "; the global batch must be divisible by virtual shards x micro-batch";
  return {};
}

DataLoader::DataLoader(const std::string& path, int seq_len, std::uint64_t seed)
    : seq_len_(seq_len), seed_(seed) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("data file '" + path + "' cannot be opened: " +
                             std::strerror(errno) + "; pass an existing text file with --data");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("data file '" + path + "' is not a regular file (" +
                             (S_ISDIR(st.st_mode) ? "a directory" : "cannot stat it") +
                             "); pass a text file with --data");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < static_cast<std::size_t>(seq_len) + 2) {
    ::close(fd);
    throw std::runtime_error("data file '" + path + "' has " + std::to_string(size_) +
                             " bytes; it needs at least seq_len + 2 = " +
                             std::to_string(seq_len + 2) +
                             "; pass a longer file or a smaller --seq-len");
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw std::runtime_error("data file '" + path + "' cannot be mapped: " + std::strerror(errno));
  bytes_ = static_cast<const std::uint8_t*>(p);
}

DataLoader::~DataLoader() {
  if (bytes_ != nullptr) ::munmap(const_cast<std::uint8_t*>(bytes_), size_);
}

std::size_t DataLoader::sample_offset(std::int64_t step, int index) const {
  std::uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<std::uint64_t>(step) * 0x100000001B3ULL +
                                                  static_cast<std::uint64_t>(index)));
  return static_cast<std::size_t>(h % (size_ - static_cast<std::size_t>(seq_len_) - 1));
}

void DataLoader::micro_batch(const BatchGeometry& g, std::int64_t step, int shard, int mb,
                             std::vector<std::int32_t>& tokens,
                             std::vector<std::int32_t>& targets) const {
  const auto T = static_cast<std::size_t>(seq_len_);
  tokens.resize(static_cast<std::size_t>(g.micro_batch) * T);
  targets.resize(tokens.size());
  for (int b = 0; b < g.micro_batch; ++b) {
    int index = shard * g.samples_per_shard() + mb * g.micro_batch + b;
    std::size_t off = sample_offset(step, index);
    for (std::size_t t = 0; t < T; ++t) {
      tokens[static_cast<std::size_t>(b) * T + t] = bytes_[off + t];
      targets[static_cast<std::size_t>(b) * T + t] = bytes_[off + t + 1];
    }
  }
}

}  // namespace flotilla::worker
