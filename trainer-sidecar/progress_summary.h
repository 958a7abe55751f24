// Folding the workers' step progress lines (common/progress_line.h) into the report's
// progress fields: last completed step, loss, tokens/s and measured seconds per stage.
//
// Guarantees: fold() keeps, per pipeline stage, the newest step line of that stage's first
//   replica seen in this pod; step is the highest completed step (line step + 1); loss and
//   tokens/s come from the newest line of the last stage (the stage that computes the loss;
//   every rank carries rank 0's global loss, so any line would do when the last stage is in
//   another pod); forward/backward seconds are the mean over the stage's micro-batches.
//   A "start" line's resumed_from_step (the checkpoint the rank resumed from) is a completed
//   step too, so an attempt that resumes at or past the job's last step (nothing left to train)
//   reports that step, not 0. A "memory" line raises peak_bytes() to its peak_bytes; other
//   events ("checkpoint") are ignored.
// Assumes: lines of one epoch and one attempt; reset() before a new attempt.
// Caveats: pure (no I/O, no clock).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/pod_plan.h"
#include "common/progress_line.h"

namespace flotilla::sidecar {

class ProgressSummary {
 public:
  explicit ProgressSummary(int pp = 1) : pp_(pp) {}
  void reset(int pp);
  // Returns true when the line was a step line.
  bool fold(const std::string& line);
  bool has_step() const { return has_step_; }  // a step line this attempt (not a start line)
  // The highest completed step: a step line's step + 1, or the step a rank resumed from; 0 when
  // neither was seen this attempt.
  std::int64_t completed_steps() const { return completed_; }
  double loss() const { return loss_; }
  double tokens_per_second() const { return tokens_per_s_; }
  std::vector<StageSeconds> stage_seconds() const;
  // The largest peak a rank of this pod measured ("memory" lines, written once per attempt after
  // the first step, when 1F1B's warm-up has held the most activations); 0 while none.
  std::int64_t peak_bytes() const { return peak_bytes_; }

 private:
  void fold_memory(const std::string& line);
  void fold_start(const std::string& line);
  int pp_ = 1;
  bool has_step_ = false;
  bool loss_from_last_stage_ = false;
  std::int64_t completed_ = 0;
  double loss_ = 0, tokens_per_s_ = 0;
  std::map<int, StageSeconds> stages_;
  std::int64_t peak_bytes_ = 0;
};

}  // namespace flotilla::sidecar
