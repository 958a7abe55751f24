// T_overhead of one rescale: save a checkpoint, start on the new GPU set, load it.
//
// FlexTrain §5.1/§7.3 uses the job's profiled init time. Where a measured restart time is known
// (the sidecar reports it after the first restart) it is used as is. Otherwise we estimate:
//   save_s = checkpoint_bytes / (nodes_before · storage_bytes_per_s_per_node)
//   load_s = checkpoint_bytes / (nodes_after  · storage_bytes_per_s_per_node)
//   init_s = init_base_s + init_per_node_s · nodes_after   (communication-group set-up grows
//            with scale, FlexTrain Fig. 10)
// Guarantees: pure; never negative; nodes are ceil(gpus / gpus_per_node) and at least 1.
// Caveats: the defaults (2 GB/s of checkpoint bandwidth per node, 30 s + 0.5 s/node of init) are
//   assumptions, not measurements; docs/scaler.md lists them.
#pragma once

#include <optional>

namespace flotilla::scaler {

struct RestartOverheadParams {
  double storage_bytes_per_s_per_node = 2e9;
  double init_base_s = 30.0;
  double init_per_node_s = 0.5;
  int gpus_per_node = 8;
};

struct RestartOverhead {
  double save_s = 0;      // write the checkpoint from the old GPU set
  double load_s = 0;      // read it on the new one
  double init_s = 0;      // process start and communication-group set-up
  bool measured = false;  // true: the job's reported restart time, held in init_s
  double total_s() const { return save_s + load_s + init_s; }
};

RestartOverhead estimate_restart_overhead(double checkpoint_bytes, int gpus_before,
                                          int gpus_after,
                                          std::optional<double> measured_restart_s = std::nullopt,
                                          const RestartOverheadParams& params = {});

}  // namespace flotilla::scaler
