// The one-line account a launcher prints when a job's ranks have exited: how far this run
// got, the checkpoint a restart would resume from, and its training throughput.
//
// Guarantees:
//   - write_run_summary() (rank 0, after every step) replaces <checkpoint-dir>/run_summary.json
//     atomically (temp file + rename, no fsync: it is a report, not state), so a reader sees
//     the previous or the new step, never a torn file, even after a SIGKILL.
//   - read_run_summary() returns nullopt when the file is absent or unreadable; a field that is
//     missing or not a number reads as 0, except a null loss (a diverged run's NaN), which
//     reads as NaN, so a diverged run still gets its summary line.
//   - summary_line() is one line: steps done by this run (first..last of the job's total),
//     the last complete checkpoint, tokens/s while training (sum of step times) and over the
//     run's wall time (start-up, rendezvous, checkpoints included), and the last loss.
// Assumes: one writer (rank 0) per checkpoint folder; the launcher deletes the file before it
//   spawns ranks, so an old file never describes a new run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace flotilla::worker {

struct RunSummary {
  std::int64_t resumed_from_step = 0;
  std::int64_t steps_completed = 0;  // the job's step counter after this run's last step
  double tokens_this_run = 0;
  double train_seconds = 0;
  double last_loss = 0;
};

std::filesystem::path run_summary_path(const std::filesystem::path& checkpoint_dir);
void write_run_summary(const std::filesystem::path& checkpoint_dir,
                       std::int64_t resumed_from_step, std::int64_t steps_completed,
                       double tokens_this_run, double train_seconds, double last_loss);
std::optional<RunSummary> read_run_summary(const std::filesystem::path& checkpoint_dir);

// `summary` nullopt: no step finished. `last_checkpoint_step` < 0: no complete checkpoint.
std::string summary_line(const std::optional<RunSummary>& summary, std::int64_t total_steps,
                         std::int64_t last_checkpoint_step, double wall_seconds, bool ok);

}  // namespace flotilla::worker
