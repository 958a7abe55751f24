// Measured per-block compute times (Sailor's profile.json) and the FLOP-based fallback.
//
// Guarantees: ComputeModel::block_times() always answers: from a profile of (model, GPU) when
//   one exists for that TP (through the per-block linear fit in mbs, see fit_profile()), else
//   from FLOPs / (peak x efficiency). O(1) per block after ProfileSet::add().
// Assumes: profile times are seconds per micro-batch on one GPU of a TP group, fwd/bwd/update;
//   block indexing as in model_spec.h. Parsing is in profile_io.h (I/O); this is pure.
// Caveats: the FLOP fallback ignores kernel-launch floors, so it is optimistic for tiny
//   micro-batches; calibration.h reports its error against the profiles.
// A profile is only ever used for a model with the same block count (embedding + layers +
//   head): ProfileSet::find() passes over one that does not match, so two models' numbers are
//   never mixed (Sailor's GPT-Neo GH-96 profile was once a copy of OPT-350's 26 blocks), and
//   load_profile_dir() refuses such a file in one line (profile_block_mismatch()).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"

namespace flotilla::planner {

struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
  double update_s = 0;  // the optimizer step over the block's parameters

  LayerTimes& operator+=(const LayerTimes& other) {
    forward_s += other.forward_s;
    backward_s += other.backward_s;
    update_s += other.update_s;
    return *this;
  }
  LayerTimes operator*(double times) const { return {forward_s * times, backward_s * times, update_s * times}; }
};

// time(mbs) = fixed + per_sample * mbs for forward, backward and update of one block.
struct BlockFit {
  LayerTimes fixed;
  LayerTimes per_sample;
};

// One model on one GPU type: mbs -> tp -> per-block times (index = block).
struct GpuProfile {
  std::string model;
  std::string gpu;
  std::map<int, std::map<int, std::vector<LayerTimes>>> by_mbs_tp;
  // tp -> per-block linear fit over all profiled micro-batch sizes (fit_profile()).
  std::map<int, std::vector<BlockFit>> fit_by_tp;
  // tp -> prefix sums of fit_by_tp (entry i = blocks [0, i)), so a stage costs O(1).
  std::map<int, std::vector<BlockFit>> prefix_by_tp;
  std::string normalized_model;  // normalize_name(model), set by fit_profile()
  std::string normalized_gpu;
};

// Fits, per TP degree and block, time = fixed + per_sample * mbs by least squares on the
// *relative* error (weights 1/t^2) over every profiled mbs. Profiled single sizes are noisy
// (OPT-350 on GH200, TP 4: a layer takes 4.5 ms at mbs 1 but 3.4 ms at mbs 2); the fit smooths
// that and keeps the launch floor that a pure FLOP model misses. With one profiled size, the
// time scales linearly from it. ProfileSet::add() calls this.
void fit_profile(GpuProfile& profile);

// One line naming the profile, the model and both block counts when some (mbs, TP) entry of
// `profile` does not have exactly model.num_blocks() blocks; "" when every entry matches.
std::string profile_block_mismatch(const GpuProfile& profile, const ModelSpec& model);

// Sailor profiles Llama with the final norm as a block of its own (embedding, layers, norm,
// head: num_blocks() + 1 blocks); our block layout counts the norm in the head. An entry with
// exactly one block too many gets its last two blocks merged (forward and backward summed, the
// larger update kept: the norm's parameters are one hidden-size vector). Other entries are left
// as they are, for profile_block_mismatch() to name.
void fold_separate_final_norm(GpuProfile& profile, const ModelSpec& model);

class ProfileSet {
 public:
  void add(GpuProfile profile);
  // Matching uses normalize_name() and model aliases ("OPT-350" matches preset OPT-350M), and
  // only profiles whose block count is the model's (profile_block_mismatch() is "").
  const GpuProfile* find(const ModelSpec& model, std::string_view gpu) const;
  // A catalog type's profile under its name or any alias (Sailor's folder for GH200-96 is GH-96).
  const GpuProfile* find(const ModelSpec& model, const GpuType& gpu) const;
  const std::vector<GpuProfile>& all() const { return profiles_; }

 private:
  std::vector<GpuProfile> profiles_;
};

class ComputeModel {
 public:
  explicit ComputeModel(const ProfileSet* profiles = nullptr) : profiles_(profiles) {}

  LayerTimes block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp, int micro_batch_size) const;
  // Sum over blocks [first, last).
  LayerTimes stage_times(const ModelSpec& model, const GpuType& gpu, int first_block, int last_block, int tp,
                         int micro_batch_size) const;
  // The FLOP estimate alone (used by calibration and when no profile exists).
  static LayerTimes estimate_block_times(const ModelSpec& model, const GpuType& gpu, int block, int tp,
                                         int micro_batch_size);

 private:
  const GpuProfile* resolve(const ModelSpec& model, const GpuType& gpu) const;
  const ProfileSet* profiles_;
  // Memo of resolve() by exact (model name, GPU name): name matching normalizes strings, and
  // the search asks for the same few pairs millions of times. Deterministic; not thread-safe.
  struct Resolved {
    std::string model;
    std::string gpu;
    const GpuProfile* profile;
  };
  mutable std::vector<Resolved> resolved_;
};

}  // namespace flotilla::planner
