#include "worker/runtime/job_options.h"

#include "common/flag_map.h"
#include "common/reference_models.h"
#include "common/significant_digits.h"

#include <charconv>
#include <cmath>
#include <map>

namespace flotilla::worker {
namespace {

// Nine significant digits round-trip a float, so a relaunch gets back the very same value.
std::string float_arg(double v) { return significant_digits_text(v, 9); }

}  // namespace

std::string job_usage() {
  return "flotilla-worker run|relaunch|rank --world-size N --pp P --dp D --data FILE "
         "--checkpoint-dir DIR [--steps K] [--model tiny|small|gpt-125m] [--partition 0:3,3:6] "
         "[--virtual-shards V] [--global-batch B] [--micro-batch M] [--checkpoint-every S] "
         "[--keep K] [--loss-log FILE] [--progress FILE|-] [--seed S] [--lr X] "
         "[--warmup-steps W] [--decay-steps D] [--grad-clip C] [--weight-decay W] "
         "[--layers L] [--hidden C] [--heads H] [--seq-len T] [--backend cpu|cuda|cuda-tf32] [--comm auto|tcp|nccl] "
         "[--recv-timeout SECONDS] [--connect-timeout SECONDS]";
}

std::variant<JobOptions, std::string> parse_job_options(const std::vector<std::string>& args) {
  FlagMap flags;
  if (std::string e = flags.collect(args, job_usage()); !e.empty()) return e;
  JobOptions o;
  auto take = [&](const char* name, auto& out) { return flags.take(name, out); };
  // Flags whose absence means "derive it": a given value, even a negative one, is checked.
  auto given = [&](const char* name) { return flags.given(name); };
  const bool has_dp = given("dp"), has_v = given("virtual-shards"), has_world = given("world-size");
  const bool has_layers = given("layers"), has_hidden = given("hidden"), has_heads = given("heads"),
             has_seq = given("seq-len");
  int dp_given = 1, v_given = 1, world_given = 1;
  int layers = 0, hidden = 0, heads = 0, seq = 0;
  std::string err;
  for (auto e : {take("world-size", world_given), take("pp", o.pp), take("dp", dp_given),
                 take("partition", o.partition), take("model", o.model_name),
                 take("data", o.data_path), take("steps", o.steps),
                 take("checkpoint-dir", o.checkpoint_dir),
                 take("checkpoint-every", o.checkpoint_every), take("keep", o.keep),
                 take("loss-log", o.loss_log), take("progress", o.progress),
                 take("virtual-shards", v_given), take("global-batch", o.geometry.global_batch),
                 take("micro-batch", o.geometry.micro_batch), take("seed", o.train.seed),
                 take("lr", o.train.lr), take("warmup-steps", o.train.warmup_steps),
                 take("decay-steps", o.train.total_steps),
                 take("grad-clip", o.train.grad_clip_norm),
                 take("weight-decay", o.train.weight_decay), take("layers", layers),
                 take("hidden", hidden), take("heads", heads), take("seq-len", seq),
                 take("backend", o.backend), take("comm", o.comm),
                 take("recv-timeout", o.recv_timeout_s),
                 take("connect-timeout", o.connect_timeout_s)}) {
    if (!e.empty() && err.empty()) err = e;
  }
  if (!err.empty()) return err;
  if (std::string e = flags.unknown(job_usage()); !e.empty()) return e;
  auto preset = gpt_preset(o.model_name);
  if (!preset) {
    return "unknown --model '" + o.model_name + "'; presets: " + reference_model_names();
  }
  o.model = *preset;
  if (has_layers) o.model.num_layers = layers;
  if (has_hidden) o.model.hidden = hidden;
  if (has_heads) o.model.heads = heads;
  if (has_seq) o.model.seq_len = seq;
  if (std::string e = validate(o.model); !e.empty()) return "model: " + e;
  if (has_dp && dp_given < 1) return std::string("--dp must be at least 1");
  o.dp = has_dp ? dp_given : 1;
  if (has_v && v_given < 1) return std::string("--virtual-shards must be at least 1");
  o.geometry.virtual_shards = has_v ? v_given : o.dp;
  if (has_world && world_given < 1) return std::string("--world-size must be at least 1");
  o.world_size = has_world ? world_given : o.pp * o.dp;
  if (o.data_path.empty()) return std::string("--data FILE is required (any text file)");
  if (o.checkpoint_dir.empty()) return std::string("--checkpoint-dir DIR is required");
  if (o.steps < 0) return std::string("--steps must be >= 0");
  if (o.keep < 1) return std::string("--keep must be at least 1");
  if (o.checkpoint_every < 0) return std::string("--checkpoint-every must be >= 0");
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "cuda-tf32")
    return "--backend '" + o.backend + "' is not cpu, cuda or cuda-tf32";
  if (o.comm != "auto" && o.comm != "tcp" && o.comm != "nccl")
    return "--comm '" + o.comm + "' is not auto, tcp or nccl";
  if (o.comm == "nccl" && o.backend == "cpu")
    return std::string("--comm nccl needs a CUDA backend (--backend cuda or cuda-tf32)");
  if (!(o.train.lr > 0)) return std::string("--lr must be a positive number");
  if (o.train.weight_decay < 0) return std::string("--weight-decay must be >= 0");
  if (o.train.warmup_steps < 0 || o.train.total_steps < 0)
    return std::string("--warmup-steps and --decay-steps must be >= 0");
  if (o.recv_timeout_s < 0 || o.connect_timeout_s < 0)
    return std::string("--recv-timeout and --connect-timeout must be positive seconds");
  auto layout = make_layout(o.world_size, o.pp, o.dp, o.model.num_units(), o.partition,
                            o.geometry);
  if (auto* e = std::get_if<std::string>(&layout)) return *e;
  o.layout = std::get<Layout>(layout);
  return o;
}

std::vector<std::string> to_args(const JobOptions& o) {
  std::vector<std::string> a = {
      "--world-size", std::to_string(o.world_size), "--pp", std::to_string(o.pp),
      "--dp", std::to_string(o.dp), "--model", o.model_name,
      "--layers", std::to_string(o.model.num_layers), "--hidden", std::to_string(o.model.hidden),
      "--heads", std::to_string(o.model.heads), "--seq-len", std::to_string(o.model.seq_len),
      "--data", o.data_path, "--steps", std::to_string(o.steps),
      "--checkpoint-dir", o.checkpoint_dir,
      "--checkpoint-every", std::to_string(o.checkpoint_every), "--keep", std::to_string(o.keep),
      "--virtual-shards", std::to_string(o.geometry.virtual_shards),
      "--global-batch", std::to_string(o.geometry.global_batch),
      "--micro-batch", std::to_string(o.geometry.micro_batch),
      "--seed", std::to_string(o.train.seed), "--lr", float_arg(o.train.lr),
      "--warmup-steps", std::to_string(o.train.warmup_steps),
      "--decay-steps", std::to_string(o.train.total_steps),
      "--grad-clip", float_arg(o.train.grad_clip_norm),
      "--weight-decay", float_arg(o.train.weight_decay), "--backend", o.backend,
      "--comm", o.comm};
  if (o.recv_timeout_s > 0) a.insert(a.end(), {"--recv-timeout", float_arg(o.recv_timeout_s)});
  if (o.connect_timeout_s > 0)
    a.insert(a.end(), {"--connect-timeout", float_arg(o.connect_timeout_s)});
  if (!o.partition.empty()) a.insert(a.end(), {"--partition", o.partition});
  if (!o.loss_log.empty()) a.insert(a.end(), {"--loss-log", o.loss_log});
  if (!o.progress.empty()) a.insert(a.end(), {"--progress", o.progress});
  return a;
}

}  // namespace flotilla::worker
