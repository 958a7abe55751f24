// Deterministic byte-level data loader over any file (each byte is a token, vocabulary 256).
//
// Guarantees: the sample at (seed, step, index-in-global-batch) is a fixed window of the file:
//   tokens = bytes[o, o+T), targets = bytes[o+1, o+T+1) with o = splitmix64(seed, step, index)
//   mod (file_bytes - T). The split of a global batch into virtual shards and micro-batches is
//   index arithmetic on top (BatchGeometry), so no sample ever depends on the parallel layout.
//   The data position of a checkpoint is therefore just the step number.
// Assumes: the file does not change while a job runs.
// Caveats: sampling is with replacement (random windows), not epoch-based.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flotilla::worker {

// How one global batch is cut: V virtual shards, each of micro_batches_per_shard() micro-batches
// of micro_batch samples. Fixed by the job, independent of the physical layout.
struct BatchGeometry {
  int global_batch = 8;    // samples per step
  int micro_batch = 1;     // samples per micro-batch
  int virtual_shards = 1;  // V: the largest data-parallel degree the job allows
  int samples_per_shard() const { return global_batch / virtual_shards; }
  int micro_batches_per_shard() const { return samples_per_shard() / micro_batch; }
  int total_micro_batches() const { return global_batch / micro_batch; }
  // Empty when valid, else one line saying what is wrong and what to fix.
  std::string validate() const;
};

class DataLoader {
 public:
  // Throws a one-line error when the file is missing, unreadable, not a regular file or
  // shorter than seq_len + 2.
  DataLoader(const std::string& path, int seq_len, std::uint64_t seed);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::size_t file_bytes() const { return size_; }
  int seq_len() const { return seq_len_; }

  // Start offset of sample `index` of the global batch of `step`.
  std::size_t sample_offset(std::int64_t step, int index) const;

  // Fills tokens/targets (micro_batch * seq_len each) for micro-batch `mb` of virtual shard
  // `shard` at `step`.
  void micro_batch(const BatchGeometry& g, std::int64_t step, int shard, int mb,
                   std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) const;

 private:
  const std::uint8_t* bytes_ = nullptr;
  std::size_t size_ = 0;
  int seq_len_ = 0;
  std::uint64_t seed_ = 0;
};

}  // namespace flotilla::worker
