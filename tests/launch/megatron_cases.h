// Jobs shared by the launcher tests: two small models and the golden plans (homogeneous,
// heterogeneous with an uneven split, TP > 1), built by hand so the expected commands can be
// worked out by hand.
#pragma once

#include <string>
#include <vector>

#include "launch/megatron.h"

namespace flotilla::launch::testcases {

// GPT-style, 8 layers (blocks 0..9), tied embeddings, learned positions.
inline planner::ModelSpec gpt_toy() {
  planner::ModelSpec m;
  m.name = "gpt-toy";
  m.family = planner::ModelFamily::kGpt;
  m.num_layers = 8;
  m.hidden = 1024;
  m.heads = 16;
  m.head_dim = 64;
  m.ffn_hidden = 4096;
  m.vocab = 50257;
  m.seq_len = 2048;
  m.max_position_embeddings = 2048;
  return m;
}

// Llama-style, 4 layers, GQA with 4 key/value heads, untied, rotary.
inline planner::ModelSpec llama_toy() {
  planner::ModelSpec m;
  m.name = "llama-toy";
  m.family = planner::ModelFamily::kLlama;
  m.num_layers = 4;
  m.hidden = 2048;
  m.heads = 16;
  m.head_dim = 128;
  m.kv_heads = 4;
  m.ffn_hidden = 5632;
  m.vocab = 32000;
  m.seq_len = 4096;
  m.tied_embeddings = false;
  return m;
}

inline MegatronStage stage(int first, int last, int tp, int mbs, std::string gpu,
                           std::vector<std::string> nodes) {
  return MegatronStage{first, last, tp, mbs, std::move(gpu), std::move(nodes)};
}

// 2 stages x D 4, TP 1, even split (4 layers each), one node of 4 GPUs per stage.
inline MegatronJob homogeneous_job() {
  MegatronJob job;
  job.model = gpt_toy();
  job.global_batch_size = 64;
  job.stages = {stage(0, 5, 1, 2, "A100-40", {"n0", "n0", "n0", "n0"}),
                stage(5, 10, 1, 2, "A100-40", {"n1", "n1", "n1", "n1"})};
  return job;
}

// Embedding + 5 layers on A100s, 3 layers + head on V100s, D 2, TP 1, bf16.
inline MegatronJob heterogeneous_job() {
  MegatronJob job;
  job.model = gpt_toy();
  job.global_batch_size = 32;
  job.training.precision = planner::Precision::kBf16Mixed;
  job.stages = {stage(0, 6, 1, 1, "A100-40", {"a100-0", "a100-0"}),
                stage(6, 10, 1, 1, "V100-16", {"v100-0", "v100-0"})};
  return job;
}

// One stage, TP 2 x D 2 on one node, sequence parallel, selective recompute.
inline MegatronJob tensor_parallel_job() {
  MegatronJob job;
  job.model = llama_toy();
  job.global_batch_size = 16;
  job.training.precision = planner::Precision::kBf16Mixed;
  job.training.sequence_parallel = true;
  job.training.recompute = planner::Recompute::kSelective;
  job.stages = {stage(0, 6, 2, 1, "H100-80", {"g0", "g0"})};
  return job;
}

}  // namespace flotilla::launch::testcases
