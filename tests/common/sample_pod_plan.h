// Test support: the PodPlans the tests and benches hand to the sidecar.
#pragma once

#include <cstdint>
#include <string>

#include "common/pod_plan.h"

namespace flotilla::testing {

// Every field set away from its default, shared by the annotation's tests
// (tests/common/pod_plan_test.cpp) and the worker-flag tests (tests/trainer-sidecar/), so a
// field that is dropped or swapped on the way shows in both: an uneven partition, a seed that
// is not the default, a barrier one behind the epoch, ranks that do not start at 0.
inline PodPlan sample_pod_plan() {
  PodPlan p;
  p.job = "team-a/demo";
  p.epoch = 3;
  p.barrier = 2;
  p.model = "small";
  p.seed = 77;
  p.global_batch_size = 8;
  p.micro_batch_size = 2;
  p.virtual_shards = 4;
  p.train_steps = 12;
  p.world_size = 6;
  p.pp = 3;
  p.dp = 2;
  p.partition = "0:1,1:4,4:6";
  p.data_path = "/data/corpus.txt";
  p.checkpoint_dir = "/ck";
  p.checkpoint_every_steps = 5;
  p.loss_log = "/ck/loss.txt";
  p.ranks = {3, 4, 5};
  p.rendezvous_pod = "demo-w-0";
  return p;
}

// What the sidecar process tests and bench/rescale_loop run: the reference worker's "small"
// model, PP only (DP 1, one rank per stage), global batch 4 in micro-batches of 1, the barrier
// lifted (barrier == epoch). The caller adds ranks, rendezvous pod and checkpoint cadence.
inline PodPlan small_pipeline_plan(const std::string& job, int pp, std::int64_t epoch, std::int64_t train_steps,
                                   const std::string& data_path, const std::string& checkpoint_dir) {
  PodPlan p;
  p.job = job;
  p.epoch = epoch;
  p.barrier = epoch;
  p.model = "small";
  p.global_batch_size = 4;
  p.micro_batch_size = 1;
  p.virtual_shards = 1;
  p.train_steps = train_steps;
  p.world_size = pp;
  p.pp = pp;
  p.dp = 1;
  p.data_path = data_path;
  p.checkpoint_dir = checkpoint_dir;
  return p;
}

}  // namespace flotilla::testing
