#include "worker/runtime/emulated_pace.h"

#include <thread>

#include "common/transformer_flops.h"
#include "worker/model/unit.h"

namespace flotilla::worker {

EmulatedPace::EmulatedPace(const GPTConfig& c, int first_unit, int end_unit, const EmulatedGpu& gpu) {
  double flops = 0, params = 0;
  for (int u = first_unit; u < end_unit; ++u) {
    params += static_cast<double>(unit_param_count(c, u));
    if (u == 0) continue;  // the embedding is a table lookup
    if (u == c.num_units() - 1)
      flops += lm_head_forward_flops(c.seq_len, static_cast<double>(c.vocab) * c.hidden);
    else
      flops += transformer_layer_forward_flops(c.seq_len, c.hidden, c.hidden, c.hidden, c.ffn_hidden(), 2.0);
  }
  forward_seconds_per_sequence_ = flops / gpu.flops_per_s;
  update_seconds_ = optimizer_update_seconds(params, gpu.memory_bandwidth_bytes_per_s);
}

double EmulatedPace::backward_seconds(int micro_batch_size) const {
  return kBackwardPerForwardFlops * forward_seconds(micro_batch_size);
}

void pad_until(std::chrono::steady_clock::time_point start, double seconds) {
  std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            std::chrono::duration<double>(seconds)));
}

}  // namespace flotilla::worker
