// The Megatron-LM launcher template (worker.kind: megatron): from a placed plan, the command
// each pod runs (torchrun with a static rendezvous in front of Megatron's pretrain_gpt.py).
//
// Guarantees: pure and deterministic (no I/O, no clock, no environment): the same job and
//   options give the same pods, byte for byte. On success:
//   - every pod runs `torchrun --nnodes N --node-rank r --nproc-per-node g --rdzv-backend static
//     --master-addr A --master-port P <script> <Megatron flags>` with the same g on every pod
//     (torchrun requires it) and the same Megatron flags;
//   - ranks follow Megatron's default order tp-cp-ep-dp-pp (cp = ep = 1): global rank
//     = tp_rank + TP·(dp_rank + D·pp_rank), so stage s holds ranks [s·TP·D, (s+1)·TP·D), and
//     node rank r holds ranks [r·g, (r+1)·g): every rank of stage s runs on a node where the
//     placement put a TP group of stage s, hence on the stage's GPU type;
//   - the stage split is the plan's: no flag when every stage holds the same number of
//     transformer layers (Megatron's even split, embedding on the first stage and the head on
//     the last), else `--pipeline-model-parallel-layout` naming each stage's blocks
//     ("Et*5|t*3|t*2L": E = block 0, t = a layer, L = block L+1);
//   - checkpoints are torch_dist with --dist-ckpt-optim-fully-reshardable (so a TP/PP change
//     can load them), the distributed optimizer, --exit-signal-handler (plan changes send
//     SIGTERM); never --finetune, --use-checkpoint-args or --no-ckpt-fully-parallel-save;
//     CUDA_DEVICE_MAX_CONNECTIONS=1 in front when TP > 1.
//   Otherwise one line saying what Megatron cannot express (a different TP per stage,
//   different micro-batch sizes, stages with different DP degrees, ZeRO-2/3, OPT's embedding
//   projection, TP not dividing the heads).
// Assumes: blocks are numbered as in planner/model_spec.h (0 = embedding, 1..L = layers,
//   L+1 = head) and stages are contiguous over 0..L+2; a stage's TP group sits on one node
//   (the packer guarantees it); a node's GPUs for this job are what the placement lists.
// Caveats: when nodes hold different GPU counts (or a node's ranks are not contiguous), one
//   node runs several pods: g is the largest multiple of TP that divides the world size and
//   keeps every block of g consecutive ranks on one node, and a node holding k·g of the job's
//   GPUs gets k pods of g GPUs (each pod asks Kubernetes for g GPUs; `notes` says so). The
//   replicas of a stage may be renumbered (grouped by node) to make g large: the replicas of a
//   stage are interchangeable (same GPU type and zone). Attention backend is left to Megatron
//   (auto); the planner's FlashAttention memory assumes it picks flash on Ampere or newer.
//   The Megatron flags were checked against one snapshot (tests/launch/, SNAPSHOT.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "planner/model_spec.h"
#include "planner/plan.h"
#include "planner/plan_and_place.h"
#include "planner/result.h"

namespace flotilla::launch {

// One pipeline stage as Megatron needs it. A caller fills it from a placed plan
// (megatron_job()) or from any other source (a scale-table entry and its placement).
struct MegatronStage {
  int first_block = 0;  // planner blocks [first_block, last_block)
  int last_block = 0;
  int tp = 1;
  int micro_batch_size = 1;
  std::string gpu_type;
  std::vector<std::string> replica_nodes;  // the node of each DP replica's TP group
};

struct MegatronJob {
  planner::ModelSpec model;
  std::vector<MegatronStage> stages;
  int global_batch_size = 0;  // sequences per iteration
  planner::TrainingOptions training;
};

// What the command needs that the plan does not give.
struct MegatronOptions {
  std::string master_addr;          // empty: the node of node rank 0
  int master_port = 29500;          // torchrun's default
  std::string script = "pretrain_gpt.py";
  std::string checkpoint_path = "/checkpoints";  // --save and --load
  int save_interval_steps = 1000;
  int train_steps = 1000;           // --train-iters
  double learning_rate = 3.0e-4;    // --lr
  std::vector<std::string> data_path;  // empty: --mock-data
  std::string tokenizer_type = "NullTokenizer";  // with --vocab-size = the model's vocab
  std::string tokenizer_model;      // --tokenizer-model when not empty
};

struct EnvVar {
  std::string name;
  std::string value;
};

// One pod: one torchrun agent with `gpus` local ranks.
struct PodLaunch {
  int node_rank = 0;
  std::string node;
  std::string gpu_type;          // the GPU type of the stage(s) its ranks belong to
  int gpus = 0;
  int first_global_rank = 0;     // node_rank * gpus
  std::vector<EnvVar> env;
  std::vector<std::string> argv;  // "torchrun", ..., script, Megatron flags

  // `NAME=value ... torchrun ...`, every word shell-quoted where it needs it.
  std::string command() const;
};

struct MegatronLaunch {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int nnodes = 0;          // pods (torchrun agents)
  int nproc_per_node = 0;  // GPUs per pod
  std::string layout;      // --pipeline-model-parallel-layout, empty for an even split
  std::vector<std::string> megatron_args;  // what follows the script, the same for every pod
  std::vector<PodLaunch> pods;             // by node rank
  std::vector<std::string> notes;          // e.g. a node split into several pods
};

// The job of the placed plan `plan` (placement: one entry per (stage, replica), any order).
planner::Result<MegatronJob> megatron_job(const planner::Plan& plan,
                                          const std::vector<planner::GroupPlacement>& placement,
                                          const planner::ModelSpec& model);
// The job of plan_and_place()'s chosen plan (fails when result.ok() is false).
planner::Result<MegatronJob> megatron_job(const planner::PlaceResult& result);

planner::Result<MegatronLaunch> render_megatron(const MegatronJob& job,
                                                const MegatronOptions& options);

// One pod's torchrun agent under a static rendezvous: the pod plan carries the counts, the
// address and port come from the sidecar's rendezvous of the epoch.
struct TorchrunPod {
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  std::string master_addr;
  int master_port = 29500;
};

// `torchrun --nnodes .. --node-rank .. --nproc-per-node .. --rdzv-backend static --master-addr
// .. --master-port ..` followed by `script_and_args` (the script, then its flags): what
// render_megatron() gives every pod, and what the sidecar execs once it knows the rendezvous.
std::vector<std::string> torchrun_argv(const TorchrunPod& pod, const std::vector<std::string>& script_and_args);

// The environment Megatron-LM needs in front of torchrun for a job of tensor-parallel size `tp`
// (CUDA_DEVICE_MAX_CONNECTIONS=1 when tp > 1, which TP's communication overlap requires).
std::vector<EnvVar> megatron_env(int tp);

// Blocks [first, last) as a layout stage: "E" for block 0, "t" per layer ("t*n" for n > 1),
// "L" for block L+1. E.g. (0, 4, 8 layers) -> "Et*3".
std::string layout_stage(int first_block, int last_block, int num_layers);

// A word quoted for a POSIX shell: unchanged when it has only [A-Za-z0-9_@%+=:,./-], else in
// single quotes (with ' written as '\'').
std::string shell_quote(const std::string& word);

}  // namespace flotilla::launch
