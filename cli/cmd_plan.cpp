// `flotilla plan`: what a model needs on a cluster, and where it would run.
//
// Guarantees: prints the best plan (stages, GPU type, TP, DP, layers, peak memory per GPU
//   against capacity, iteration seconds, tokens/s, USD/iteration), its best-fit placement on
//   the cluster's nodes (Frenzy HAS), the next best alternatives, and why others were rejected;
//   --json prints the same as one JSON object. The decision is planner::plan_and_place(); this
//   file only reads files and prints. Exit 0 with a plan; 1 when nothing fits or meets
//   the constraints (one line, naming the smallest change that would fit, found by re-searching
//   with it); 2 on bad input (one line: what is wrong and what to fix).
//   `flotilla plan evaluate ...` is dispatched to run_plan_evaluate() (cli/plan_evaluate.h).
//   With --launcher megatron the search keeps one TP for all stages (megatron_constraints())
//   and, after the usual output, prints one shell-quoted launch command per pod of the chosen
//   plan (launch::render_megatron(); --json adds them under "launch"); a plan Megatron cannot
//   express exits 1 after the plan with one line saying why.
// Assumes: cluster.yaml as documented in planner/cluster.h (examples/cluster.yaml).
// Caveats: without --profiles, compute times come from FLOPs x calibrated efficiency.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/plan_evaluate.h"
#include "common/text_file.h"
#include "launch/megatron.h"
#include "planner/cluster.h"
#include "planner/model_spec_io.h"
#include "planner/network_io.h"
#include "planner/plan_and_place.h"
#include "planner/profile_io.h"
#include "planner/search_space.h"

namespace fp = flotilla::planner;

namespace {

constexpr const char* kUsage =
    "usage: flotilla plan --model NAME|FILE --cluster FILE [--objective throughput|cost] "
    "[--max-usd-per-iter X] [--min-tokens-per-s Y] [--gbs N (default 2048)] [--profiles DIR] [--network DIR] "
    "[--gpu-catalog FILE] [--recompute none|selective|full] [--zero 0-3] [--alternatives K] "
    "[--attention flash|materialized (default flash, on GPUs that support it)] [--json]\n"
    "       [--launcher megatron [--megatron-master-addr HOST (default: the node of pod 0)] "
    "[--megatron-master-port P (default 29500)] [--megatron-script PATH (default pretrain_gpt.py)] "
    "[--checkpoint-path DIR (default /checkpoints; --save and --load)] [--save-interval N (default 1000)] "
    "[--data-path PATH (repeatable; default --mock-data)] [--train-steps N (default 1000; --train-iters)]]\n"
    "       --launcher megatron plans with one TP for all stages and prints one launch command per pod\n"
    "       (torchrun, static rendezvous, Megatron-LM flags; docs/launch.md)\n"
    "       flotilla plan evaluate --help";

int bad(const std::string& line) { return flotilla::cli::usage_error("flotilla plan", line); }

bool parse_number(const std::string& text, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(text, &used);
    return used == text.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

std::string gb(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buffer;
}

std::string human_rate(double tokens_per_second) {
  char buffer[32];
  if (tokens_per_second >= 1e6) std::snprintf(buffer, sizeof buffer, "%.2fM", tokens_per_second / 1e6);
  else if (tokens_per_second >= 1e3) std::snprintf(buffer, sizeof buffer, "%.1fk", tokens_per_second / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.0f", tokens_per_second);
  return buffer;
}

// Blocks [first, last) as layers: block 0 is the embedding, L+1 the head.
std::string layers_of(int first, int last, int num_layers) {
  std::string text;
  if (first == 0) text += "emb";
  const int lo = std::max(first, 1), hi = std::min(last - 1, num_layers);
  if (lo <= hi) {
    if (!text.empty()) text += "+";
    text += lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  }
  if (last == num_layers + 2) text += text.empty() ? "head" : "+head";
  return text;
}

// The memory of the GPU the stage's last rank runs on (a stage's ranks may mix GPU types).
std::int64_t stage_capacity_bytes(const fp::Evaluation& e, int stage) {
  std::int64_t capacity = 0;
  for (const fp::RankReport& r : e.ranks)
    if (r.stage == stage) capacity = r.capacity_bytes;
  return capacity;
}

constexpr int kNodesListed = 12;  // the table lists this many nodes; --json lists all

struct Args {
  std::string model, cluster, profiles, network, catalog;
  fp::Objective objective = fp::Objective::kMaxThroughput;
  std::optional<double> max_usd, min_tokens;
  int gbs = 2048;
  int alternatives = 4;
  fp::Recompute recompute = fp::Recompute::kNone;
  int zero = 0;
  // FlashAttention on GPUs that run it (Ampere+): what current stacks do; materialized is
  // Korthikanti's s*s scores (Sailor's runs).
  bool flash_attention = true;
  bool json = false;
  std::string launcher;  // "" or "megatron"
  flotilla::launch::MegatronOptions megatron;
};

// "" on success, else the one line to print.
std::string parse_args(const std::vector<std::string>& args, Args& out, bool& help) {
  // Flags whose value is a name or a path, taken as written.
  const std::map<std::string, std::string*> text_flags = {{"--model", &out.model},
                                                          {"--cluster", &out.cluster},
                                                          {"--profiles", &out.profiles},
                                                          {"--network", &out.network},
                                                          {"--gpu-catalog", &out.catalog}};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string value;
    auto need = [&]() {
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      return true;
    };
    auto number = [&](double& x, bool positive) -> std::string {
      if (!need()) return a + " needs a value";
      if (!parse_number(value, x) || x < 0 || (positive && x == 0))
        return a + " must be a " + (positive ? "positive" : "non-negative") + " number, got '" +
               value + "'";
      return "";
    };
    double x = 0;
    std::string err;
    if (a == "--help" || a == "-h") {
      help = true;
      return "";
    } else if (auto path = text_flags.find(a); path != text_flags.end()) {
      if (!need()) return a + " needs a value";
      *path->second = value;
    } else if (a == "--objective") {
      if (!need()) return "--objective needs a value";
      if (value == "throughput") out.objective = fp::Objective::kMaxThroughput;
      else if (value == "cost") out.objective = fp::Objective::kMinCost;
      else return "--objective must be 'throughput' or 'cost', got '" + value + "'";
    } else if (a == "--max-usd-per-iter") {
      if (!(err = number(x, true)).empty()) return err;
      out.max_usd = x;
    } else if (a == "--min-tokens-per-s") {
      if (!(err = number(x, true)).empty()) return err;
      out.min_tokens = x;
    } else if (a == "--gbs" || a == "--alternatives" || a == "--zero") {
      if (!(err = number(x, a == "--gbs")).empty()) return err;
      if (x != std::floor(x) || x > 1e7) return a + " must be an integer up to 10000000, got '" + value + "'";
      if (a == "--gbs") out.gbs = static_cast<int>(x);
      else if (a == "--alternatives") out.alternatives = static_cast<int>(x);
      else if (x > 3) return "--zero must be 0, 1, 2 or 3";
      else out.zero = static_cast<int>(x);
    } else if (a == "--recompute") {
      if (!need()) return "--recompute needs a value";
      if (value == "none") out.recompute = fp::Recompute::kNone;
      else if (value == "selective") out.recompute = fp::Recompute::kSelective;
      else if (value == "full") out.recompute = fp::Recompute::kFull;
      else return "--recompute must be none, selective or full, got '" + value + "'";
    } else if (a == "--attention") {
      if (!need()) return "--attention needs a value";
      if (value == "flash") out.flash_attention = true;
      else if (value == "materialized") out.flash_attention = false;
      else return "--attention must be flash or materialized, got '" + value + "'";
    } else if (a == "--json") {
      out.json = true;
    } else if (a == "--launcher") {
      if (!need()) return "--launcher needs a value";
      if (value != "megatron") return "--launcher must be 'megatron', got '" + value + "'";
      out.launcher = value;
    } else if (a == "--megatron-master-addr" || a == "--megatron-script" || a == "--checkpoint-path" ||
               a == "--data-path") {
      if (!need() || value.empty()) return a + " needs a non-empty value";
      if (a == "--megatron-master-addr") out.megatron.master_addr = value;
      else if (a == "--megatron-script") out.megatron.script = value;
      else if (a == "--checkpoint-path") out.megatron.checkpoint_path = value;
      else out.megatron.data_path.push_back(value);
    } else if (a == "--megatron-master-port" || a == "--train-steps" || a == "--save-interval") {
      if (!(err = number(x, true)).empty()) return err;
      const double most = a == "--megatron-master-port" ? 65535 : 1e9;
      if (x != std::floor(x) || x > most)
        return a + " must be an integer from 1 to " + std::to_string(static_cast<long>(most)) + ", got '" + value + "'";
      if (a == "--megatron-master-port") out.megatron.master_port = static_cast<int>(x);
      else if (a == "--train-steps") out.megatron.train_steps = static_cast<int>(x);
      else out.megatron.save_interval_steps = static_cast<int>(x);
    } else {
      return "unknown argument '" + a + "' (see flotilla plan --help)";
    }
  }
  if (out.model.empty()) return "--model is required (a preset such as llama-3-8b, or a spec file)";
  if (out.cluster.empty()) return "--cluster is required (see examples/cluster.yaml)";
  if (out.launcher == "megatron" && out.zero >= 2)
    return "--launcher megatron runs Megatron's distributed optimizer (ZeRO-1): use --zero 0 or 1";
  return "";
}

// A stage's GPU type, or its types joined by '+' when its DP replicas mix types (issue 13).
std::string stage_gpu_types(const fp::Stage& stage) {
  std::string out = stage.replicas.front().gpu_type;
  std::vector<std::string> seen = {out};
  for (const fp::Replica& r : stage.replicas) {
    if (std::find(seen.begin(), seen.end(), r.gpu_type) != seen.end()) continue;
    seen.push_back(r.gpu_type);
    out += "+" + r.gpu_type;
  }
  return out;
}

nlohmann::json plan_json(const fp::RankedPlan& ranked, const fp::ModelSpec& model) {
  const fp::Evaluation& e = ranked.evaluation;
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < ranked.plan.stages.size(); ++s) {
    const fp::Stage& stage = ranked.plan.stages[s];
    const fp::StageReport& report = e.stages[s];
    const std::int64_t capacity = stage_capacity_bytes(e, static_cast<int>(s));
    stages.push_back({{"stage", s},
                      {"first_block", stage.first_block},
                      {"last_block", stage.last_block},
                      {"layers", layers_of(stage.first_block, stage.last_block, model.num_layers)},
                      {"gpu_type", stage.replicas.front().gpu_type},
                      {"zone", stage.replicas.front().zone},
                      {"tp", stage.tp},
                      {"dp", stage.dp()},
                      {"in_flight_micro_batches", report.in_flight_micro_batches},
                      {"peak_bytes", report.peak_bytes},
                      {"capacity_bytes", capacity},
                      {"forward_seconds", report.timing.forward_s},
                      {"backward_seconds", report.timing.backward_s},
                      {"p2p_seconds", report.timing.p2p_s},
                      {"dp_sync_seconds", report.timing.dp_sync_s},
                      {"tied_sync_seconds", report.timing.tied_sync_s}});
    if (stage_gpu_types(stage) != stage.replicas.front().gpu_type) {  // mixed replicas only
      nlohmann::json per_type = nlohmann::json::object();
      for (const fp::Replica& r : stage.replicas)
        per_type[r.gpu_type] = per_type.value(r.gpu_type, 0) + 1;
      stages.back()["replicas_per_gpu_type"] = per_type;
    }
  }
  return {{"micro_batch_size", ranked.plan.micro_batch_size},
          {"dp", ranked.plan.dp()},
          {"num_stages", ranked.plan.num_stages()},
          {"num_gpus", ranked.plan.num_gpus()},
          {"num_micro_batches", e.num_micro_batches},
          {"iter_seconds", e.iter_seconds},
          {"tokens_per_second", e.tokens_per_second},
          {"usd_per_iteration", e.usd_per_iteration},
          {"peak_bytes_max", e.peak_bytes_max},
          {"summary", fp::describe_plan(ranked.plan)},
          {"stages", stages}};
}

void print_table(const fp::RankedPlan& best, const fp::ModelSpec& model) {
  const fp::Evaluation& e = best.evaluation;
  std::printf("best plan: %d stage%s x D %d, micro-batch %d (%d per replica), %d GPUs\n",
              best.plan.num_stages(), best.plan.num_stages() == 1 ? "" : "s", best.plan.dp(),
              best.plan.micro_batch_size, e.num_micro_batches, best.plan.num_gpus());
  std::printf("  iter %.3f s   %s tokens/s   %.4f USD/iter\n\n", e.iter_seconds,
              human_rate(e.tokens_per_second).c_str(), e.usd_per_iteration);
  std::printf("  %-5s %-12s %-9s %-4s %-4s %-9s %-21s %-11s\n", "stage", "layers", "gpu", "TP",
              "DP", "in-flight", "peak/GPU (capacity)", "fwd+bwd/mb");
  for (std::size_t s = 0; s < best.plan.stages.size(); ++s) {
    const fp::Stage& stage = best.plan.stages[s];
    const fp::StageReport& r = e.stages[s];
    const std::int64_t capacity = stage_capacity_bytes(e, static_cast<int>(s));
    const std::string memory = gb(r.peak_bytes) + " (" + gb(capacity) + ")";
    std::printf("  %-5zu %-12s %-9s %-4d %-4d %-9d %-21s %.4f s\n", s,
                layers_of(stage.first_block, stage.last_block, model.num_layers).c_str(),
                stage_gpu_types(stage).c_str(), stage.tp, stage.dp(),
                r.in_flight_micro_batches, memory.c_str(),
                r.timing.forward_s + r.timing.backward_s);
  }
}

fp::Result<flotilla::launch::MegatronLaunch> render_launch(const fp::PlaceResult& placed,
                                                         const flotilla::launch::MegatronOptions& options) {
  auto job = flotilla::launch::megatron_job(placed);
  if (!job) return fp::Result<flotilla::launch::MegatronLaunch>::failure(job.error());
  return flotilla::launch::render_megatron(*job, options);
}

nlohmann::json launch_json(const flotilla::launch::MegatronLaunch& launch, const std::string& launcher) {
  nlohmann::json pods = nlohmann::json::array();
  for (const flotilla::launch::PodLaunch& pod : launch.pods) {
    nlohmann::json env = nlohmann::json::object();
    for (const flotilla::launch::EnvVar& e : pod.env) env[e.name] = e.value;
    pods.push_back({{"node_rank", pod.node_rank}, {"node", pod.node}, {"gpu_type", pod.gpu_type}, {"gpus", pod.gpus},
                    {"env", env}, {"argv", pod.argv}, {"command", pod.command()}});
  }
  return {{"launcher", launcher}, {"tp", launch.tp}, {"pp", launch.pp}, {"dp", launch.dp},
          {"nnodes", launch.nnodes}, {"nproc_per_node", launch.nproc_per_node},
          {"layout", launch.layout}, {"notes", launch.notes}, {"pods", pods}};
}

// One "# pod R on node N (G GPUs)" line and the command under it, per pod.
void print_launch(const flotilla::launch::MegatronLaunch& launch, const std::string& launcher) {
  std::printf("\nlaunch (%s): %d pod%s x %d GPUs, TP %d, PP %d, DP %d%s%s\n", launcher.c_str(),
              launch.nnodes, launch.nnodes == 1 ? "" : "s", launch.nproc_per_node, launch.tp,
              launch.pp, launch.dp, launch.layout.empty() ? "" : ", layout ",
              launch.layout.c_str());
  for (const std::string& note : launch.notes) std::printf("  note: %s\n", note.c_str());
  for (const flotilla::launch::PodLaunch& pod : launch.pods) {
    std::printf("# pod %d on node %s (%d GPUs)\n", pod.node_rank, pod.node.c_str(), pod.gpus);
    std::printf("%s\n", pod.command().c_str());
  }
}

}  // namespace

static int run_plan(const std::vector<std::string>& raw) {
  Args args;
  bool help = false;
  if (std::string err = parse_args(raw, args, help); !err.empty()) return bad(err);
  if (help) {
    std::printf("%s\n", kUsage);
    return 0;
  }
  auto model = fp::resolve_model(args.model);
  if (!model) return bad(model.error());
  // An input-sanity limit, not a speed one: deep models plan in seconds (the stage DP groups
  // layers past 128 positions, docs/planner.md); past this the DP's 16-bit block indices end.
  if (model.value().num_layers > fp::kMaxSearchLayers)
    return bad(model.value().name + " has " + std::to_string(model.value().num_layers) +
               " transformer layers; flotilla plan handles at most " +
               std::to_string(fp::kMaxSearchLayers) + " (check num_layers in the spec)");
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  if (!args.catalog.empty()) {
    std::string text;
    if (!flotilla::read_text_file(args.catalog, text))
      return bad("cannot read GPU catalog file '" + args.catalog + "'");
    auto c = fp::apply_catalog_override(std::move(catalog), text);
    if (!c) return bad(args.catalog + ": " + c.error());
    catalog = std::move(c.value());
  }
  std::string cluster_text;
  if (!flotilla::read_text_file(args.cluster, cluster_text))
    return bad("cannot read cluster file '" + args.cluster + "'");
  auto cluster = fp::parse_cluster(cluster_text, catalog);
  if (!cluster) return bad(args.cluster + ": " + cluster.error());
  fp::ProfileSet profiles;
  if (!args.profiles.empty()) {
    auto p = fp::load_profile_dir(args.profiles);
    if (!p) return bad(p.error());
    profiles = std::move(p.value());
  }
  fp::NetworkModel network = fp::default_network_model();
  if (!args.network.empty()) {
    auto n = fp::load_network_dir(args.network);
    if (!n) return bad(n.error());
    network = std::move(n.value());
  }
  fp::ComputeModel compute(args.profiles.empty() ? nullptr : &profiles);
  fp::EvalContext context;
  context.catalog = &catalog;
  context.compute = &compute;
  context.network = &network;

  fp::PlaceRequest request;
  request.model = *model;
  request.global_batch_size = args.gbs;
  request.training.recompute = args.recompute;
  request.training.zero_stage = args.zero;
  request.training.flash_attention = args.flash_attention;
  request.objective = args.objective;
  request.constraints.max_usd_per_iteration = args.max_usd;
  request.constraints.min_tokens_per_second = args.min_tokens;
  // Enough ranked plans that the packer can fall through to the next when one does not place.
  request.max_plans = std::max(args.alternatives + 1, 8);
  // Megatron-LM has one tensor_model_parallel_size for the whole job.
  if (args.launcher == "megatron") request.worker = fp::megatron_constraints();

  const fp::PlaceResult placed = fp::plan_and_place(request, *cluster, context);
  const fp::SearchResult& result = placed.search;
  const std::string attention =
      args.flash_attention ? "flash (materialized on pre-Ampere GPUs)" : "materialized";
  int free_gpus = 0;
  for (const fp::GpuPool& pool : placed.search_request.pools) free_gpus += pool.gpus;

  if (placed.failure == fp::PlaceFailure::kCannotPlaceOnNodes || (!placed.ok() && result.failure.empty())) {
    std::fprintf(stderr, "flotilla plan: %s\n", placed.message.c_str());
    return 1;
  }
  if (!placed.ok()) {
    std::string line = model->name + ": " + result.failure;
    if (const auto& change = placed.suggestion)
      line += "; smallest change that fits: " + change->change + " (then " +
              human_rate(change->plan.evaluation.tokens_per_second) + " tokens/s, " +
              fp::describe_plan(change->plan.plan) + ")";
    else
      line += "; no single change tried (recompute, larger TP, up to 16x the GPUs, a larger GPU type) makes it fit";
    if (args.json) {
      nlohmann::json out = {{"model", model->name}, {"feasible", false}, {"attention", attention}, {"error", line}};
      std::printf("%s\n", out.dump(2).c_str());
    }
    std::fprintf(stderr, "flotilla plan: %s\n", line.c_str());
    return 1;
  }

  // Frenzy HAS: the first ranked plan that the packer could place, best fit.
  const std::size_t chosen = placed.chosen;
  const fp::RankedPlan& best = placed.plan();
  const auto& by_node = placed.gpus_by_node;

  if (args.json) {
    nlohmann::json out;
    out["model"] = model->name;
    out["feasible"] = true;
    out["objective"] = args.objective == fp::Objective::kMaxThroughput ? "throughput" : "cost";
    out["global_batch_size"] = args.gbs;
    out["attention"] = attention;
    out["free_gpus"] = free_gpus;
    out["plan"] = plan_json(best, *model);
    out["placement"] = by_node;
    out["alternatives"] = nlohmann::json::array();
    for (std::size_t i = 0; i < result.plans.size(); ++i) {
      if (i == chosen || static_cast<int>(out["alternatives"].size()) >= args.alternatives) continue;
      out["alternatives"].push_back(plan_json(result.plans[i], *model));
    }
    out["not_placed"] = placed.not_placed;
    out["rejected"] = nlohmann::json::array();
    for (const fp::Rejection& r : result.rejections)
      out["rejected"].push_back({{"what", r.what}, {"why", r.why}});
    out["rejection_counts"] = result.rejection_counts;
    out["search"] = {{"dp_runs", result.stats.dp_runs},
                     {"layers_per_dp_position", result.stats.layers_per_dp_position},
                     {"dp_states", result.stats.dp_states},
                     {"beam_dp_runs", result.stats.beam_dp_runs},
                     {"dp_runs_ruled_out", result.stats.dp_runs_ruled_out},
                     {"dp_solves_recalled", result.stats.dp_solves_recalled},
                     {"evaluations", result.stats.evaluations}};
    if (!args.launcher.empty()) {
      auto launch = render_launch(placed, args.megatron);
      if (!launch) {
        std::printf("%s\n", out.dump(2).c_str());
        std::fprintf(stderr, "flotilla plan: cannot launch with %s: %s\n", args.launcher.c_str(), launch.error().c_str());
        return 1;
      }
      out["launch"] = launch_json(*launch, args.launcher);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }

  std::printf("flotilla plan: %s, global batch %d x %d tokens, objective %s, attention %s, %d GPUs free\n\n",
              model->name.c_str(), args.gbs, model->seq_len,
              args.objective == fp::Objective::kMaxThroughput ? "max throughput" : "min cost",
              attention.c_str(), free_gpus);
  print_table(best, *model);
  std::printf("\nplacement (best fit, node:GPUs):");
  int listed = 0;
  for (const auto& [node, gpus] : by_node) {
    if (listed++ == kNodesListed) {
      std::printf(" ... and %zu more nodes", by_node.size() - kNodesListed);
      break;
    }
    std::printf(" %s:%d", node.c_str(), gpus);
  }
  std::printf("\n");
  for (const std::string& why : placed.not_placed) std::printf("  not placed: %s\n", why.c_str());

  std::printf("\nnext best:\n");
  int shown = 0;
  for (std::size_t i = 0; i < result.plans.size() && shown < args.alternatives; ++i) {
    if (i == chosen) continue;
    const fp::Evaluation& e = result.plans[i].evaluation;
    std::printf("  %9s tokens/s  %8.4f USD/iter  %8.3f s  %s\n", human_rate(e.tokens_per_second).c_str(),
                e.usd_per_iteration, e.iter_seconds, fp::describe_plan(result.plans[i].plan).c_str());
    ++shown;
  }
  if (shown == 0) std::printf("  (none)\n");
  std::printf("\nrejected:");
  for (const auto& [kind, count] : result.rejection_counts) std::printf(" %s %d", kind.c_str(), count);
  std::printf("\n");
  for (const fp::Rejection& r : result.rejections)
    std::printf("  %s: %s\n", r.what.c_str(), r.why.c_str());
  if (!args.launcher.empty()) {
    auto launch = render_launch(placed, args.megatron);
    if (!launch) {
      std::fprintf(stderr, "flotilla plan: cannot launch with %s: %s\n", args.launcher.c_str(), launch.error().c_str());
      return 1;
    }
    print_launch(*launch, args.launcher);
  }
  return 0;
}

namespace {
const flotilla::cli::CommandRegistrar plan_command{{
    "plan", "plan resources and parallelism for a model (`plan evaluate` scores one given plan)",
    [](const std::vector<std::string>& args) {
      if (!args.empty() && args[0] == "evaluate")
        return run_plan_evaluate(std::vector<std::string>(args.begin() + 1, args.end()));
      return run_plan(args);
    }}};
}  // namespace
