// Hand-checkable models shared by the scaler tests.
#pragma once

#include "scaler/elastic_model.h"

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

}  // namespace flotilla::scaler::test_models
