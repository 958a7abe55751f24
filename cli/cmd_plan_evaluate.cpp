#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/plan_evaluate.h"
#include "common/text_file.h"
#include "planner/evaluate.h"
#include "planner/gpu_catalog.h"
#include "planner/model_spec_io.h"
#include "planner/network_io.h"
#include "planner/profile_io.h"
#include "planner/sailor_plan.h"

namespace fp = flotilla::planner;

namespace {

constexpr const char* kUsage =
    "usage: flotilla plan evaluate --sailor-plan FILE (--training-config FILE | --model NAME) "
    "[--profiles DIR] [--network DIR] [--gpu-catalog FILE] "
    "[--framework megatron|megatron-unfused-softmax|aceso-op-level] "
    "[--attention materialized|flash (default materialized, as in Sailor's runs)] [--json]";

int bad(const std::string& line) { return flotilla::cli::usage_error("flotilla plan evaluate", line); }

nlohmann::json memory_json(const fp::MemoryBreakdown& m) {
  return {{"weights_bytes", m.weights_bytes},         {"grads_bytes", m.grads_bytes},
          {"optimizer_bytes", m.optimizer_bytes},     {"activations_bytes", m.activations_bytes},
          {"transient_bytes", m.transient_bytes},     {"comm_buffer_bytes", m.comm_buffer_bytes},
          {"overhead_bytes", m.overhead_bytes},       {"peak_bytes", m.peak_bytes}};
}

nlohmann::json runtime_json(const fp::RuntimeOverhead& r) {
  return {{"cuda_context_bytes", r.cuda_context_bytes},
          {"nccl_bytes", r.nccl_bytes},
          {"cublas_workspace_bytes", r.cublas_workspace_bytes}};
}

}  // namespace

int run_plan_evaluate(const std::vector<std::string>& args) {
  std::string plan_path, config_path, model_name, profiles_dir, network_dir, catalog_path;
  std::string framework = "megatron";
  std::string attention = "materialized";
  bool as_json = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) return false;
      out = args[++i];
      return true;
    };
    bool ok = true;
    if (a == "--sailor-plan") ok = value(plan_path);
    else if (a == "--training-config") ok = value(config_path);
    else if (a == "--model") ok = value(model_name);
    else if (a == "--profiles") ok = value(profiles_dir);
    else if (a == "--network") ok = value(network_dir);
    else if (a == "--gpu-catalog") ok = value(catalog_path);
    else if (a == "--framework") ok = value(framework);
    else if (a == "--attention") ok = value(attention);
    else if (a == "--json") as_json = true;
    else if (a == "--help" || a == "-h") {
      std::printf("%s\n", kUsage);
      return 0;
    } else return bad("unknown argument '" + a + "'; " + kUsage);
    if (!ok) return bad(a + " needs a value");
  }
  if (plan_path.empty()) return bad(std::string("--sailor-plan is required; ") + kUsage);
  if (config_path.empty() && model_name.empty()) return bad("give --training-config FILE or --model NAME");

  auto model = !config_path.empty() ? fp::load_model_spec_file(config_path) : fp::resolve_model(model_name);
  if (!model) return bad(model.error());
  fp::GpuCatalog catalog = fp::builtin_gpu_catalog();
  if (!catalog_path.empty()) {
    std::string text;
    if (!flotilla::read_text_file(catalog_path, text))
      return bad("cannot read GPU catalog file '" + catalog_path + "'");
    auto c = fp::apply_catalog_override(std::move(catalog), text);
    if (!c) return bad(c.error());
    catalog = std::move(c.value());
  }
  fp::ProfileSet profiles;
  if (!profiles_dir.empty()) {
    auto p = fp::load_profile_dir(profiles_dir);
    if (!p) return bad(p.error());
    profiles = std::move(p.value());
  }
  fp::NetworkModel network = fp::default_network_model();
  if (!network_dir.empty()) {
    auto n = fp::load_network_dir(network_dir);
    if (!n) return bad(n.error());
    network = std::move(n.value());
  }
  std::string plan_text;
  if (!flotilla::read_text_file(plan_path, plan_text)) return bad("cannot read plan file '" + plan_path + "'");
  auto plan = fp::parse_sailor_plan(plan_text, model->num_blocks());
  if (!plan) return bad(plan_path + ": " + plan.error());
  for (const fp::Stage& s : plan->plan.stages) {
    for (const fp::Replica& r : s.replicas) {
      if (catalog.find(r.gpu_type) == nullptr) {
        return bad("unknown GPU type '" + r.gpu_type + "' in " + plan_path + "; add it with --gpu-catalog FILE");
      }
    }
  }

  // How the training framework holds activations (docs/planner.md, megatron-runs): fused
  // Megatron layers (Megatron-LM, Megatron-DeepSpeed, Sailor's runs), the same with an unfused
  // fp32 softmax, or Aceso's op-level runtime (which also runs its softmax unfused in fp32).
  if (framework == "megatron-unfused-softmax") {
    plan->plan.options.fused_softmax = false;
  } else if (framework == "aceso-op-level") {
    plan->plan.options.op_level_activations = true;
    plan->plan.options.fused_softmax = false;
  } else if (framework != "megatron") {
    return bad("unknown --framework '" + framework + "'; use megatron, megatron-unfused-softmax or aceso-op-level");
  }

  // Sailor's plan files come from runs without FlashAttention: materialised scores by default.
  if (attention == "flash") plan->plan.options.flash_attention = true;
  else if (attention != "materialized") return bad("unknown --attention '" + attention + "'; use materialized or flash");

  fp::ComputeModel compute(profiles_dir.empty() ? nullptr : &profiles);
  const fp::EvalContext ctx{&catalog, &compute, &network};
  const fp::Evaluation ev = fp::evaluate(plan->plan, *model, ctx);
  if (ev.infeasible && ev.infeasible->kind != fp::InfeasibleKind::kOutOfMemory) return bad(ev.infeasible->message);

  if (as_json) {
    nlohmann::json out;
    out["model"] = model->name;
    out["attention"] = attention;
    out["peak_bytes_max"] = ev.peak_bytes_max;
    out["iter_seconds"] = ev.iter_seconds;
    out["pipeline_seconds"] = ev.pipeline_seconds;
    out["sync_seconds"] = ev.sync_seconds;
    out["tokens_per_second"] = ev.tokens_per_second;
    out["usd_per_iteration"] = ev.usd_per_iteration;
    out["usd_compute_per_iteration"] = ev.usd_compute_per_iteration;
    out["usd_network_per_iteration"] = ev.usd_network_per_iteration;
    out["num_micro_batches"] = ev.num_micro_batches;
    out["feasible"] = ev.feasible();
    if (ev.infeasible) {
      out["infeasible"] = {{"kind", "out_of_memory"},          {"message", ev.infeasible->message},
                           {"stage", ev.infeasible->stage},    {"rank", ev.infeasible->rank},
                           {"peak_bytes", ev.infeasible->peak_bytes},
                           {"capacity_bytes", ev.infeasible->capacity_bytes}};
    }
    out["stages"] = nlohmann::json::array();
    for (const fp::StageReport& s : ev.stages) {
      out["stages"].push_back({{"stage", s.stage},
                               {"first_block", s.first_block},
                               {"last_block", s.last_block},
                               {"tp", s.tp},
                               {"dp", s.dp},
                               {"in_flight_micro_batches", s.in_flight_micro_batches},
                               {"peak_bytes", s.peak_bytes},
                               {"forward_seconds", s.timing.forward_s},
                               {"backward_seconds", s.timing.backward_s},
                               {"p2p_seconds", s.timing.p2p_s},
                               {"dp_sync_seconds", s.timing.dp_sync_s},
                               {"tied_sync_seconds", s.timing.tied_sync_s},
                               {"update_seconds", s.timing.update_s}});
    }
    out["ranks"] = nlohmann::json::array();
    for (const fp::RankReport& r : ev.ranks) {
      out["ranks"].push_back({{"rank", r.rank},
                              {"stage", r.stage},
                              {"replica", r.replica},
                              {"tp_rank", r.tp_rank},
                              {"gpu_type", r.gpu_type},
                              {"zone", r.zone},
                              {"peak_bytes", r.memory.peak_bytes},
                              {"capacity_bytes", r.capacity_bytes},
                              {"memory", memory_json(r.memory)},
                              {"runtime", runtime_json(r.runtime)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("model %s, %d stages, %d GPUs, %d micro-batches, attention %s\n", model->name.c_str(),
                plan->plan.num_stages(), plan->plan.num_gpus(), ev.num_micro_batches, attention.c_str());
    for (const fp::StageReport& s : ev.stages) {
      std::printf("  stage %d blocks [%d,%d) tp %d dp %d: peak %.2f GB per rank, fwd %.4f s bwd %.4f s per micro-batch\n",
                  s.stage, s.first_block, s.last_block, s.tp, s.dp, s.peak_bytes / 1e9, s.timing.forward_s,
                  s.timing.backward_s);
    }
    std::printf("peak_bytes_max %lld (%.2f GB), iter_seconds %.4f, tokens_per_second %.0f, usd_per_iteration %.5f\n",
                static_cast<long long>(ev.peak_bytes_max), ev.peak_bytes_max / 1e9, ev.iter_seconds,
                ev.tokens_per_second, ev.usd_per_iteration);
  }
  if (ev.infeasible) {
    std::fprintf(stderr, "flotilla plan evaluate: %s\n", ev.infeasible->message.c_str());
    return 1;
  }
  return 0;
}
