#include "launch/megatron.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string_view>

namespace flotilla::launch {

namespace fp = flotilla::planner;

namespace {

std::string str(int value) { return std::to_string(value); }

// Shortest text that reads back as the same double ("0.0003", "1e-05").
std::string number_text(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::stod(buffer) == value) break;
  }
  return buffer;
}

// Transformer layers in blocks [first, last): blocks 1..L.
int layers_in(int first_block, int last_block, int num_layers) {
  const int lo = std::max(first_block, 1), hi = std::min(last_block, num_layers + 1);
  return std::max(0, hi - lo);
}

std::string check_job(const MegatronJob& job) {
  const fp::ModelSpec& m = job.model;
  if (m.num_layers <= 0) return "model '" + m.name + "' has no transformer layers";
  if (job.stages.empty()) return "the plan has no stages";
  if (m.embed_proj_dim > 0)
    return m.name + " projects " + str(m.embed_proj_dim) + "-wide embeddings to the hidden size (OPT); Megatron-LM has no flag for that projection";
  if (job.training.zero_stage >= 2)
    return "ZeRO-" + str(job.training.zero_stage) + " is not what Megatron's distributed optimizer does (it shards optimizer state only, ZeRO-1): plan with --zero 0 or 1";
  const MegatronStage& first = job.stages.front();
  for (std::size_t s = 0; s < job.stages.size(); ++s) {
    const MegatronStage& stage = job.stages[s];
    const std::string name = "stage " + str(static_cast<int>(s));
    if (stage.tp != first.tp)
      return "Megatron-LM runs one tensor-parallel size for all stages, but stage 0 has TP " +
             str(first.tp) + " and " + name + " has TP " + str(stage.tp) +
             " (plan with megatron_constraints(): one TP for all stages)";
    if (stage.micro_batch_size != first.micro_batch_size)
      return "Megatron-LM runs one micro-batch size for all stages, but stage 0 has " +
             str(first.micro_batch_size) + " and " + name + " has " + str(stage.micro_batch_size);
    if (stage.replica_nodes.size() != first.replica_nodes.size())
      return "Megatron-LM runs one data-parallel size for all stages, but stage 0 has " +
             str(static_cast<int>(first.replica_nodes.size())) + " replicas and " + name + " has " +
             str(static_cast<int>(stage.replica_nodes.size()));
    const int expected_first = s == 0 ? 0 : job.stages[s - 1].last_block;
    if (stage.first_block != expected_first || stage.last_block <= stage.first_block)
      return name + " covers blocks [" + str(stage.first_block) + ", " + str(stage.last_block) +
             ") but should start at block " + str(expected_first) + " and hold at least one block";
    for (const std::string& node : stage.replica_nodes)
      if (node.empty()) return name + " has a replica with no node (place the plan first)";
  }
  if (job.stages.back().last_block != m.num_blocks())
    return "the last stage ends at block " + str(job.stages.back().last_block) + " but " + m.name +
           " has " + str(m.num_blocks()) + " blocks (embedding, " + str(m.num_layers) + " layers, head)";
  const int tp = first.tp, mbs = first.micro_batch_size;
  const int dp = static_cast<int>(first.replica_nodes.size());
  if (tp < 1 || mbs < 1 || dp < 1) return "TP, micro-batch size and replicas must be positive";
  if (m.heads % tp != 0)
    return "TP " + str(tp) + " does not divide " + m.name + "'s " + str(m.heads) + " attention heads";
  if (m.effective_kv_heads() % tp != 0)
    return "TP " + str(tp) + " does not divide " + m.name + "'s " + str(m.effective_kv_heads()) + " key/value heads";
  if (job.global_batch_size <= 0 || job.global_batch_size % (mbs * dp) != 0)
    return "global batch " + str(job.global_batch_size) + " is not a multiple of micro-batch " +
           str(mbs) + " x DP " + str(dp) + " (Megatron requires it)";
  return "";
}

// The Megatron flags shared by every pod.
std::vector<std::string> megatron_args(const MegatronJob& job, const MegatronOptions& options,
                                       int tp, int pp, const std::string& layout) {
  const fp::ModelSpec& m = job.model;
  std::vector<std::string> a = {"--tensor-model-parallel-size", str(tp),
                                "--pipeline-model-parallel-size", str(pp)};
  if (!layout.empty()) a.insert(a.end(), {"--pipeline-model-parallel-layout", layout});
  a.insert(a.end(), {"--num-layers", str(m.num_layers), "--hidden-size", str(m.hidden),
                     "--num-attention-heads", str(m.heads), "--ffn-hidden-size", str(m.ffn_hidden),
                     "--seq-length", str(m.seq_len), "--max-position-embeddings",
                     str(m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_len)});
  if (m.head_dim > 0 && m.head_dim * m.heads != m.hidden)
    a.insert(a.end(), {"--kv-channels", str(m.head_dim)});
  if (m.effective_kv_heads() != m.heads)
    a.insert(a.end(), {"--group-query-attention", "--num-query-groups", str(m.effective_kv_heads())});
  if (m.family == fp::ModelFamily::kLlama)
    a.insert(a.end(), {"--swiglu", "--normalization", "RMSNorm", "--position-embedding-type",
                       "rope", "--disable-bias-linear"});
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  a.insert(a.end(), {"--tokenizer-type", options.tokenizer_type});
  if (!options.tokenizer_model.empty()) a.insert(a.end(), {"--tokenizer-model", options.tokenizer_model});
  if (options.tokenizer_type == "NullTokenizer") a.insert(a.end(), {"--vocab-size", str(m.vocab)});
  a.insert(a.end(), {"--micro-batch-size", str(job.stages.front().micro_batch_size),
                     "--global-batch-size", str(job.global_batch_size)});
  switch (job.training.precision) {
    case fp::Precision::kBf16Mixed: a.push_back("--bf16"); break;
    case fp::Precision::kFp16Mixed: a.push_back("--fp16"); break;
    case fp::Precision::kFp32: break;
  }
  switch (job.training.recompute) {
    case fp::Recompute::kNone: break;
    case fp::Recompute::kSelective: a.insert(a.end(), {"--recompute-granularity", "selective"}); break;
    case fp::Recompute::kFull:
      a.insert(a.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform",
                         "--recompute-num-layers", "1"});
      break;
  }
  if (job.training.sequence_parallel && tp > 1) a.push_back("--sequence-parallel");
  a.push_back("--use-distributed-optimizer");
  a.insert(a.end(), {"--train-iters", str(options.train_steps), "--lr", number_text(options.learning_rate)});
  if (options.data_path.empty()) {
    a.push_back("--mock-data");
  } else {
    a.push_back("--data-path");
    a.insert(a.end(), options.data_path.begin(), options.data_path.end());
  }
  a.insert(a.end(), {"--ckpt-format", "torch_dist", "--dist-ckpt-optim-fully-reshardable",
                     "--save", options.checkpoint_path, "--load", options.checkpoint_path,
                     "--save-interval", str(options.save_interval_steps), "--exit-signal-handler"});
  return a;
}

}  // namespace

std::string layout_stage(int first_block, int last_block, int num_layers) {
  std::string text;
  if (first_block == 0) text += "E";
  const int n = layers_in(first_block, last_block, num_layers);
  if (n == 1) text += "t";
  else if (n > 1) text += "t*" + str(n);
  if (last_block == num_layers + 2) text += "L";
  return text;
}

std::string shell_quote(const std::string& word) {
  if (!word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
      }))
    return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string PodLaunch::command() const {
  std::string out;
  for (const EnvVar& e : env) out += e.name + "=" + shell_quote(e.value) + " ";
  for (std::size_t i = 0; i < argv.size(); ++i) out += (i ? " " : "") + shell_quote(argv[i]);
  return out;
}

std::vector<std::string> torchrun_argv(const TorchrunPod& pod, const std::vector<std::string>& script_and_args) {
  std::vector<std::string> argv = {"torchrun", "--nnodes", str(pod.nnodes), "--node-rank", str(pod.node_rank),
                                   "--nproc-per-node", str(pod.nproc_per_node), "--rdzv-backend", "static",
                                   "--master-addr", pod.master_addr, "--master-port", str(pod.master_port)};
  argv.insert(argv.end(), script_and_args.begin(), script_and_args.end());
  return argv;
}

std::vector<EnvVar> megatron_env(int tp) {
  if (tp > 1) return {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  return {};
}

fp::Result<MegatronJob> megatron_job(const fp::Plan& plan,
                                     const std::vector<fp::GroupPlacement>& placement,
                                     const fp::ModelSpec& model) {
  MegatronJob job;
  job.model = model;
  job.global_batch_size = plan.global_batch_size;
  job.training = plan.options;
  for (const fp::Stage& stage : plan.stages) {
    MegatronStage out;
    out.first_block = stage.first_block;
    out.last_block = stage.last_block;
    out.tp = stage.tp;
    out.micro_batch_size = plan.micro_batch_size;
    out.gpu_type = stage.replicas.empty() ? "" : stage.replicas.front().gpu_type;
    out.replica_nodes.assign(stage.replicas.size(), "");
    job.stages.push_back(std::move(out));
  }
  for (const fp::GroupPlacement& g : placement) {
    if (g.stage < 0 || g.stage >= plan.num_stages() || g.replica < 0 ||
        g.replica >= plan.stages[g.stage].dp())
      return fp::Result<MegatronJob>::failure("placement names stage " + str(g.stage) + " replica " +
                                              str(g.replica) + ", which the plan does not have");
    if (g.gpus != plan.stages[g.stage].tp)
      return fp::Result<MegatronJob>::failure(
          "placement gives stage " + str(g.stage) + " replica " + str(g.replica) + " " + str(g.gpus) +
          " GPUs but the stage's TP is " + str(plan.stages[g.stage].tp));
    std::string& node = job.stages[g.stage].replica_nodes[g.replica];
    if (!node.empty())
      return fp::Result<MegatronJob>::failure("placement names stage " + str(g.stage) + " replica " +
                                              str(g.replica) + " twice");
    node = g.node;
  }
  for (std::size_t s = 0; s < job.stages.size(); ++s)
    for (std::size_t d = 0; d < job.stages[s].replica_nodes.size(); ++d)
      if (job.stages[s].replica_nodes[d].empty())
        return fp::Result<MegatronJob>::failure("placement has no node for stage " + str(static_cast<int>(s)) +
                                                " replica " + str(static_cast<int>(d)));
  return job;
}

fp::Result<MegatronJob> megatron_job(const fp::PlaceResult& result) {
  if (!result.ok()) return fp::Result<MegatronJob>::failure("no placed plan: " + result.message);
  return megatron_job(result.plan().plan, result.placement, result.model);
}

fp::Result<MegatronLaunch> render_megatron(const MegatronJob& job, const MegatronOptions& options) {
  using R = fp::Result<MegatronLaunch>;
  if (std::string why = check_job(job); !why.empty()) return R::failure(why);
  if (options.master_port < 1 || options.master_port > 65535)
    return R::failure("master port " + str(options.master_port) + " is not in 1..65535");
  if (options.train_steps < 1 || options.save_interval_steps < 1)
    return R::failure("train steps and save interval must be positive");
  if (!(options.learning_rate > 0) || !std::isfinite(options.learning_rate))
    return R::failure("learning rate must be a positive finite number");
  if (options.script.empty() || options.checkpoint_path.empty())
    return R::failure("the script and the checkpoint path must not be empty");

  MegatronLaunch out;
  out.tp = job.stages.front().tp;
  out.pp = static_cast<int>(job.stages.size());
  out.dp = static_cast<int>(job.stages.front().replica_nodes.size());
  const int world = out.tp * out.dp * out.pp;

  // Nodes numbered by first appearance (stage-major, then replica); each stage's replicas
  // (interchangeable: one GPU type and zone) grouped by that number, so a node's ranks are as
  // contiguous as the plan allows.
  std::map<std::string, int> node_order;
  for (const MegatronStage& stage : job.stages)
    for (const std::string& node : stage.replica_nodes) node_order.emplace(node, static_cast<int>(node_order.size()));
  std::vector<std::string> node_of_rank;
  node_of_rank.reserve(world);
  for (const MegatronStage& stage : job.stages) {
    std::vector<std::string> nodes = stage.replica_nodes;
    std::stable_sort(nodes.begin(), nodes.end(), [&](const std::string& a, const std::string& b) {
      return node_order.at(a) < node_order.at(b);
    });
    for (const std::string& node : nodes) node_of_rank.insert(node_of_rank.end(), out.tp, node);
  }

  // GPUs per pod: the largest multiple of TP dividing the world whose blocks of consecutive
  // ranks each sit on one node (TP itself always does: a TP group never spans nodes).
  auto blocks_on_one_node = [&](int g) {
    for (int start = 0; start < world; start += g)
      for (int r = start + 1; r < start + g; ++r)
        if (node_of_rank[r] != node_of_rank[start]) return false;
    return true;
  };
  int g = out.tp;
  for (int candidate = world; candidate > out.tp; candidate -= out.tp)
    if (world % candidate == 0 && blocks_on_one_node(candidate)) {
      g = candidate;
      break;
    }
  out.nproc_per_node = g;
  out.nnodes = world / g;

  for (std::size_t s = 0; s < job.stages.size() && out.pp > 1; ++s) {
    const int n = layers_in(job.stages[s].first_block, job.stages[s].last_block, job.model.num_layers);
    if (n != layers_in(job.stages[0].first_block, job.stages[0].last_block, job.model.num_layers)) {
      for (std::size_t t = 0; t < job.stages.size(); ++t)
        out.layout += (t ? "|" : "") + layout_stage(job.stages[t].first_block, job.stages[t].last_block, job.model.num_layers);
      break;
    }
  }
  out.megatron_args = megatron_args(job, options, out.tp, out.pp, out.layout);

  std::map<std::string, int> pods_on_node;
  for (int r = 0; r < out.nnodes; ++r) ++pods_on_node[node_of_rank[r * g]];
  for (const auto& [node, pods] : pods_on_node)
    if (pods > 1)
      out.notes.push_back("node " + node + " runs " + str(pods) + " pods of " + str(g) +
                          " GPUs (torchrun needs one --nproc-per-node for all pods)");

  const std::string master = options.master_addr.empty() ? node_of_rank.front() : options.master_addr;
  std::vector<std::string> script_and_args = {options.script};
  script_and_args.insert(script_and_args.end(), out.megatron_args.begin(), out.megatron_args.end());
  for (int r = 0; r < out.nnodes; ++r) {
    PodLaunch pod;
    pod.node_rank = r;
    pod.node = node_of_rank[r * g];
    pod.gpu_type = job.stages[(r * g) / (out.tp * out.dp)].gpu_type;
    pod.gpus = g;
    pod.first_global_rank = r * g;
    pod.env = megatron_env(out.tp);
    pod.argv = torchrun_argv({out.nnodes, r, g, master, options.master_port}, script_and_args);
    out.pods.push_back(std::move(pod));
  }
  return out;
}

}  // namespace flotilla::launch
