// Which GPU a rank of a CUDA job uses.
//
// Guarantees: gpu_for_local_rank() returns the value to put in CUDA_VISIBLE_DEVICES for the
//   rank with LOCAL_RANK `local_rank`: entry local_rank % n of the comma-separated list in
//   FLOTILLA_VISIBLE_GPUS if set, else of CUDA_VISIBLE_DEVICES if set, else of 0..count-1 for
//   `device_count` > 0; "" when there is nothing to choose from (leave the environment alone).
//   Each rank then sees exactly one device, device 0, which is what the CUDA backend and NCCL
//   use. The launcher applies it when spawning ranks; `flotilla-worker rank` applies it again
//   (idempotent: a one-entry list maps to itself) so torchrun-style starters that export one
//   visible list to every rank also get one GPU per local rank.
//   distinct_gpus() counts the distinct devices a job of `local_ranks` ranks would use.
// Assumes: list entries are device ordinals or UUIDs, as CUDA_VISIBLE_DEVICES accepts.
// Caveats: pure string logic; it never initializes CUDA.
#pragma once

#include <string>
#include <vector>

namespace flotilla::worker {

std::vector<std::string> split_gpu_list(const std::string& list);
std::string gpu_for_local_rank(int local_rank, const char* flotilla_visible_gpus,
                               const char* cuda_visible_devices, int device_count);
int distinct_gpus(int local_ranks, const char* flotilla_visible_gpus,
                  const char* cuda_visible_devices, int device_count);

}  // namespace flotilla::worker
