// Hand-checkable models shared by the scaler tests.
#pragma once

#include <utility>
#include <vector>

#include "scaler/elastic_model.h"
#include "scaler/scale_table.h"

namespace flotilla::scaler::test_models {

// Equal layers of 1 s forward + 2 s backward per micro-batch, B micro-batches of size 1, no
// embedding cost, no communication, memory never binding: every time is countable by hand.
inline ElasticModel uniform_model(int layers = 8, int batch = 8,
                                  ParallelConfig initial = {1, 2, 1, 1}) {
  ElasticModel m;
  m.name = "uniform";
  m.transformer_layers = layers;
  m.global_batch = batch;
  m.initial = initial;
  m.layer_fwd_s = 1.0;
  m.layer_bwd_s = 2.0;
  m.embedding_cost_factor = 0.0;
  m.gpu_memory_bytes = 1e12;
  return m;
}

// A hand-written scale table: layouts dp1/pp(g/8)/tp1/cp8 at the given (GPUs, speedup) entries,
// starting at `initial` GPUs and capped at `cap` GPUs.
inline ScaleTable hand_table(const std::vector<std::pair<int, double>>& entries, int initial = 8,
                             int cap = 32) {
  ScaleTable t;
  t.initial = {1, initial / 8, 1, 8};
  t.cap_gpus = cap;
  for (auto [g, s] : entries) {
    ScaleEntry e;
    e.gpus = g;
    e.config = {1, g / 8, 1, 8};
    e.speedup = s;
    e.modeled_speedup = s;
    t.entries.push_back(e);
  }
  return t;
}

}  // namespace flotilla::scaler::test_models
