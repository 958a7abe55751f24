// The Megatron-LM launch of a TrainingJob of worker kind megatron: its spec as the launcher's
// options, and the placed plan rendered into the torchrun command of every pod.
//
// Guarantees: pure. megatron_options() maps the spec one to one: --train-iters = trainSteps,
//   --save/--load = checkpoint.path, --save-interval = checkpoint.intervalSteps, --data-path =
//   the whitespace-separated words of worker.data (a prefix, or Megatron's blend "0.3 /d/a 0.7
//   /d/b"; empty: --mock-data), the script, tokenizer and learning rate of
//   worker.megatron. The master address is left empty: the sidecar of node rank 0's pod
//   publishes the real one per epoch (flotilla.io/rendezvous) and the sidecars exec torchrun
//   with it (launch::torchrun_argv()).
//   render_job_launch() is launch::megatron_job() + launch::render_megatron() with
//   worker.extraArgs appended after the rendered flags, or one line saying why Megatron-LM
//   cannot run the plan (render's reason, or an extra argument that sets a flag Flotilla
//   renders, e.g. --save: the plan and the checkpoint own those).
// Assumes: `spec.worker_kind` is kMegatron and `placed.ok()`.
// Caveats: the rendered flags were checked against one Megatron-LM snapshot (docs/launch.md);
//   nothing here runs Megatron.
#pragma once

#include <string>
#include <vector>

#include "launch/megatron.h"
#include "operator/job_spec.h"
#include "planner/plan_and_place.h"
#include "planner/result.h"

namespace flotilla::op {

launch::MegatronOptions megatron_options(const JobSpec& spec);

planner::Result<launch::MegatronLaunch> render_job_launch(const JobSpec& spec, const planner::PlaceResult& placed);

}  // namespace flotilla::op
