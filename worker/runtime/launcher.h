// The local launcher behind `flotilla-worker run` and `relaunch`.
//
// Guarantees:
//   - Validates everything it can before starting a process: the flags and layout (at most 256
//     local ranks), the data
//     file, that the checkpoint folder is a writable folder (created if missing), that the
//     --loss-log and --progress files can be opened for writing, and that the newest complete
//     checkpoint is well-formed and matches the job; each failure is one line on stderr and
//     exit code 2.
//   - run: takes the checkpoint folder's JobLock (one launcher per job), spawns world-size
//     copies of this binary as `rank` with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
//     MASTER_PORT and LOCAL_RANK set (and, for a CUDA backend, CUDA_VISIBLE_DEVICES naming one
//     GPU per rank, see gpu_selection.h; --comm auto resolved to nccl or tcp), and waits. SIGTERM/SIGINT to the launcher is forwarded
//     to every rank (they finish the step, checkpoint and exit 0). A failed rank stops the
//     others and makes the launcher exit 1 naming it (and any rank it had to SIGKILL).
//   - Prints one summary line when the ranks have exited (run_summary.h), success or not.
//   - relaunch: SIGTERMs the launcher that holds the lock (if any), waits for it to finish
//     its checkpoint and exit, then runs the new layout, which resumes from that checkpoint.
//   - The sequence (stop, resume check, lock, spawn) is worker/launch/start_job.h, which the
//     trainer sidecar calls too; this file adds the validation, the ranks' environment and
//     the summary.
// Assumes: all ranks on this machine.
#pragma once

#include <string>
#include <vector>

namespace flotilla::worker {

int launcher_main(const std::string& mode, const std::vector<std::string>& args);
int rank_main(const std::vector<std::string>& args);

}  // namespace flotilla::worker
