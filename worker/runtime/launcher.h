// The local launcher behind `flotilla-worker run` and `relaunch`.
//
// Guarantees:
//   - Validates everything it can before starting a process: the flags and layout, the data
//     file, and that the newest complete checkpoint matches the job; each failure is one line
//     on stderr and exit code 2.
//   - run: takes the checkpoint folder's JobLock (one launcher per job), spawns world-size
//     copies of this binary as `rank` with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
//     MASTER_PORT and LOCAL_RANK set (and, for a CUDA backend without CUDA_VISIBLE_DEVICES,
//     one GPU per rank round-robin), and waits. SIGTERM/SIGINT to the launcher is forwarded
//     to every rank (they finish the step, checkpoint and exit 0). A failed rank stops the
//     others and makes the launcher exit 1 naming it.
//   - relaunch: SIGTERMs the launcher that holds the lock (if any), waits for it to finish
//     its checkpoint and exit, then runs the new layout, which resumes from that checkpoint.
// Assumes: all ranks on this machine.
#pragma once

#include <string>
#include <vector>

namespace flotilla::worker {

int launcher_main(const std::string& mode, const std::vector<std::string>& args);
int rank_main(const std::vector<std::string>& args);

}  // namespace flotilla::worker
