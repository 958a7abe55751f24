// `flotilla simulate availability`: one training job on a GPU pool that follows an availability
// trace (Sailor's A100 traces), under static, greedy and flextrain (Poisson benefit check).
// The shell: reads the trace, Sailor's profiles and network fits; the replay itself is
// simulator/availability_table.h (planner's best plan per count) and
// simulator/availability_replay.h (pure, over the scaler's decide()).
// See docs/simulator.md, "Availability replay".
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/simulate_flags.h"
#include "common/data_path.h"
#include "planner/gpu_catalog.h"
#include "planner/model_spec.h"
#include "simulator/availability_replay.h"
#include "simulator/availability_table.h"
#include "simulator/sailor_job_loader.h"
#include "simulator/trace_loader.h"

namespace flotilla::cli {

namespace {

using namespace flotilla::scaler;
using namespace flotilla::simulator;

const char* kAvailabilityUsage =
    "usage: flotilla simulate availability --trace FILE --model NAME --gpu TYPE\n"
    "         [--gpus-per-node K] [--restart-seconds S] [--policy static|greedy|flextrain|all]\n"
    "         [--gbs N] [--consistency relaxed|strict] [--p-th P] [--window-h H]\n"
    "         [--tp T] [--attention flash|materialized] [--profiles DIR] [--network DIR] [--json]\n"
    "  One job; the GPUs free to it follow FILE ([{\"Time\": s, \"GPUs\": n}], e.g.\n"
    "  $FLOTILLA_DATA/sailor/availability/a100_trace.json). The plan for each GPU count is the\n"
    "  planner's best (evaluate() with Sailor's profiles). A drop below the GPUs in use forces a\n"
    "  shrink and a restart; a gain is taken by greedy always, by flextrain only when the Poisson\n"
    "  benefit check passes (λ = availability drops in the past --window-h, default 1 h), never\n"
    "  by static.\n"
    "  --model            a planner preset (OPT-350, GPT-Neo-2.7, ...)\n"
    "  --gpu              a catalog GPU type (A100-40, ...)\n"
    "  --gpus-per-node    node size for the network model and the restart estimate (default:\n"
    "                     the catalog's, 4 for A100-40)\n"
    "  --restart-seconds  a measured restart time; default: the restart_overhead estimate\n"
    "                     (checkpoint 14 B/param saved and loaded at 2 GB/s per node, plus\n"
    "                     30 s + 0.5 s per node of init)\n"
    "  --tp               tensor parallelism of every plan (default: of 1, 2, 4, ... up to the\n"
    "                     node size, the one that fits on the fewest GPUs, the smaller on a tie)\n"
    "  --gbs              global batch in samples, micro-batch 1 (default 2048)\n"
    "  --attention        flash (default, as `flotilla plan`: on GPUs that support it, Ampere and\n"
    "                     newer; materialised scores elsewhere) or materialized (Sailor's runs)\n"
    "  --profiles/--network  default $FLOTILLA_DATA/sailor/profiles and .../network\n";

nlohmann::json benefit_json(const BenefitDecision& b) {
  return {{"lambda_per_s", b.arrival_rate_per_s},
          {"speedup", b.speedup},
          {"overhead_s", b.overhead_s},
          {"required_idle_s", b.required_idle_s},
          {"probability", b.probability},
          {"threshold_probability", b.threshold_probability},
          {"scale_up", b.scale_up}};
}

nlohmann::json result_json(const AvailabilityResult& r) {
  nlohmann::json log = nlohmann::json::array();
  for (const auto& d : r.decisions) {
    nlohmann::json e = {{"time_s", d.time_s},       {"available_gpus", d.available_gpus},
                        {"from_gpus", d.from_gpus}, {"to_gpus", d.to_gpus},
                        {"action", d.action},       {"layout", d.layout},
                        {"restart_s", d.restart_s}, {"reason", d.reason}};
    if (d.benefit) e["benefit_check"] = benefit_json(*d.benefit);
    log.push_back(std::move(e));
  }
  return {{"policy", availability_policy_name(r.policy)},
          {"duration_s", r.duration_s},
          {"samples", r.samples},
          {"gpu_hours", r.gpu_hours},
          {"samples_per_gpu_hour", r.samples_per_gpu_hour},
          {"available_gpu_hours", r.available_gpu_hours},
          {"restarts", r.restarts},
          {"restart_time_s", r.restart_time_s},
          {"benefit_checks_passed", r.benefit_checks_passed},
          {"benefit_checks_refused", r.benefit_checks_refused},
          {"max_held_gpus", r.max_held_gpus},
          {"decisions", log},
          {"invariant_violations", r.violations}};
}

}  // namespace

int run_simulate_availability(const std::vector<std::string>& args) {
  auto bad = [](const std::string& msg) { return usage_error("flotilla simulate availability", msg); };
  std::string trace_path, model_name, gpu, profiles_dir, network_dir, consistency = "relaxed";
  const std::vector<AvailabilityPolicy> all_policies = {AvailabilityPolicy::static_start,
                                                        AvailabilityPolicy::greedy,
                                                        AvailabilityPolicy::flextrain};
  std::vector<AvailabilityPolicy> policies = all_policies;
  bool json = false;
  bool flash_attention = true;  // as `flotilla plan`; evaluate() applies it per GPU type
  int gpus_per_node = 0, gbs = 2048, tp = 0;  // tp 0: the smallest that fits
  std::optional<double> restart_s;
  AvailabilityReplayParams params;
  static const std::vector<std::string> kFlagsWithValue = {
      "--trace",       "--model", "--gpu",      "--gpus-per-node", "--restart-seconds", "--policy",    "--gbs",
      "--consistency", "--p-th",  "--window-h", "--profiles",      "--network",         "--attention", "--tp"};
  // Flags whose value is a name or a path, taken as written.
  const std::map<std::string, std::string*> text_flags = {{"--trace", &trace_path},
                                                          {"--model", &model_name},
                                                          {"--gpu", &gpu},
                                                          {"--profiles", &profiles_dir},
                                                          {"--network", &network_dir}};
  // Each flag's value: "" once taken, else the line to print.
  auto take = [&](const std::string& a, const std::string& v) -> std::string {
    if (auto path = text_flags.find(a); path != text_flags.end()) {
      *path->second = v;
      return "";
    }
    double x = 0;
    if (a == "--attention") {
      if (v == "flash")
        flash_attention = true;
      else if (v == "materialized")
        flash_attention = false;
      else
        return "--attention must be flash or materialized, got '" + v + "'";
    } else if (a == "--tp") {
      if (!parse_whole(v, 1, 64, x)) return "--tp must be a whole number in [1, 64], got '" + v + "'";
      tp = static_cast<int>(x);
    } else if (a == "--gpus-per-node") {
      if (!parse_whole(v, 1, 1024, x)) return "--gpus-per-node must be a whole number in [1, 1024], got '" + v + "'";
      gpus_per_node = static_cast<int>(x);
    } else if (a == "--restart-seconds") {
      if (!parse_number(v, x) || x < 0 || x > kMaxTraceSeconds)
        return "--restart-seconds must be a number of seconds in [0, 10 years], got '" + v + "'";
      restart_s = x;
    } else if (a == "--policy") {
      if (v == "all") {  // the last --policy wins, `all` included
        policies = all_policies;
        return "";
      }
      const auto p = parse_availability_policy(v);
      if (!p) return "unknown policy '" + v + "': use static, greedy, flextrain or all";
      policies = {*p};
    } else if (a == "--gbs") {
      if (!parse_whole(v, 1, 1 << 24, x)) return "--gbs must be a whole number in [1, 2^24], got '" + v + "'";
      gbs = static_cast<int>(x);
    } else if (a == "--consistency") {
      bool strict = false;
      if (const auto e = parse_consistency(v, strict); !e.empty()) return e;
      consistency = v;
    } else if (a == "--p-th") {
      if (const auto e = parse_p_th(v, x); !e.empty()) return e;
      params.benefit.threshold_probability = x;
    } else if (a == "--window-h") {
      if (const auto e = parse_window_h(v, params.window_s); !e.empty()) return e;
    }
    return "";
  };
  if (const auto stop =
          walk_simulate_flags(args, "flotilla simulate availability", kAvailabilityUsage, kFlagsWithValue, json, take))
    return *stop;
  if (trace_path.empty() || model_name.empty() || gpu.empty())
    return bad("--trace FILE, --model NAME and --gpu TYPE are required (see --help)");
  if (!planner::find_preset(model_name))
    return bad("unknown model '" + model_name + "': use a planner preset (e.g. OPT-350, GPT-Neo-2.7)");

  auto resolve = [](const std::string& given, const char* relative) -> std::optional<std::string> {
    if (!given.empty()) return given;
    const auto p = flotilla::data_path(relative);
    if (!p) return std::nullopt;
    return p->string();
  };
  const auto prof = resolve(profiles_dir, "sailor/profiles");
  if (!prof) {
    std::fprintf(stderr, "flotilla simulate availability: %s\n",
                 flotilla::data_missing_message("sailor/profiles").c_str());
    return 1;
  }
  const auto net = resolve(network_dir, "sailor/network");
  if (!net) {
    std::fprintf(stderr, "flotilla simulate availability: %s\n",
                 flotilla::data_missing_message("sailor/network").c_str());
    return 1;
  }
  const auto trace = load_availability_trace(trace_path);
  if (!trace.error.empty()) return bad(trace.error), 1;
  auto loaded = load_sailor_planner_job(model_name, gpu, gbs, *prof, *net);
  if (!loaded.error.empty()) return bad(loaded.error), 1;
  PlannerJob& job = loaded.job;
  job.gpus_per_node = gpus_per_node;
  job.options.flash_attention = flash_attention;
  int max_gpus = 0;
  for (const auto& p : trace.points) max_gpus = std::max(max_gpus, p.gpus);
  const Consistency cons = consistency == "strict" ? Consistency::strict : Consistency::relaxed;
  // Without --tp the core picks the TP that fits on the fewest GPUs (Sailor profiles Llama-3-8B
  // on A100-40 at TP 2 and 4 only).
  const planner::GpuType* gpu_type = planner::builtin_gpu_catalog().find(gpu);
  const int node = gpus_per_node > 0 ? gpus_per_node : gpu_type ? gpu_type->gpus_per_node : 1;
  const AvailabilityTable at = choose_availability_table(job, max_gpus, cons, tp, node);
  if (!at.table) return bad(at.error), 1;
  const ScaleTable& table = *at.table;

  params.restart_s = restart_s;
  params.checkpoint_bytes = at.model.checkpoint_bytes;
  params.global_batch = gbs;
  if (gpus_per_node > 0 || gpu_type) params.overhead.gpus_per_node = node;
  const bool profiled = loaded.profiled;

  std::vector<AvailabilityResult> results;
  for (auto p : policies) {
    params.policy = p;
    results.push_back(replay_availability(trace.points, table, params));
  }
  const AvailabilityResult* by_name[3] = {nullptr, nullptr, nullptr};
  for (const auto& r : results) by_name[static_cast<int>(r.policy)] = &r;
  bool violated = false;
  for (const auto& r : results) violated = violated || !r.violations.empty();

  if (json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const auto& e : table.entries)
      plans.push_back({{"gpus", e.gpus},
                       {"layout", e.config.to_string()},
                       {"iteration_s", e.iteration_s},
                       {"samples_per_s", entry_samples_per_s(e, gbs)}});
    nlohmann::json pols = nlohmann::json::array();
    for (const auto& r : results) pols.push_back(result_json(r));
    nlohmann::json out = {{"trace", trace_path},
                          {"rows", trace.points.size()},
                          {"model", job.model.name},
                          {"gpu", gpu},
                          {"gpus_per_node", params.overhead.gpus_per_node},
                          {"global_batch", gbs},
                          {"consistency", consistency},
                          {"tp", at.model.initial.tp},
                          {"attention", flash_attention ? "flash" : "materialized"},
                          {"profiled", profiled},
                          {"restart", restart_s ? nlohmann::json(*restart_s) : nlohmann::json("estimate")},
                          {"window_s", params.window_s},
                          {"threshold_probability", params.benefit.threshold_probability},
                          {"plans", plans},
                          {"policies", pols}};
    std::printf("%s\n", out.dump(2).c_str());
    return violated ? 1 : 0;
  }
  std::printf("availability %s: %zu rows over %.0f s, %d to %d GPUs\n", trace_path.c_str(),
              trace.points.size(), results.front().duration_s,
              std::min_element(trace.points.begin(), trace.points.end(),
                               [](auto& a, auto& b) { return a.gpus < b.gpus; })->gpus,
              max_gpus);
  char restart_text[64] = "estimated per transition";
  if (restart_s) std::snprintf(restart_text, sizeof restart_text, "%g s", *restart_s);
  std::printf("job %s on %s (%s), global batch %d, %s, TP %d, %s attention; restart %s; λ window %.2f h, P_th %.2f\n",
              job.model.name.c_str(), gpu.c_str(), profiled ? "Sailor profile" : "FLOP estimate, no profile",
              gbs, consistency.c_str(), at.model.initial.tp, flash_attention ? "flash" : "materialized", restart_text, params.window_s / 3600,
              params.benefit.threshold_probability);
  std::printf("  plans:");
  for (const auto& e : table.entries)
    std::printf(" %d:%s=%.2f/s", e.gpus, e.config.to_string().c_str(), entry_samples_per_s(e, gbs));
  std::printf("\n  %-9s %12s %9s %14s %8s %10s %12s\n", "policy", "samples", "GPU-h",
              "samples/GPU-h", "restarts", "restart s", "checks +/-");
  for (const auto& r : results)
    std::printf("  %-9s %12.0f %9.2f %14.0f %8d %10.0f %7d/%d\n", availability_policy_name(r.policy),
                r.samples, r.gpu_hours, r.samples_per_gpu_hour, r.restarts, r.restart_time_s,
                r.benefit_checks_passed, r.benefit_checks_refused);
  const auto* st = by_name[0];
  const auto* gr = by_name[1];
  const auto* fx = by_name[2];
  if (fx && gr && gr->samples > 0)
    std::printf("  flextrain / greedy: samples %.4f, samples per GPU-hour %.4f\n",
                fx->samples / gr->samples, fx->samples_per_gpu_hour / gr->samples_per_gpu_hour);
  if (fx && st && st->samples > 0)
    std::printf("  flextrain / static: samples %.4f, samples per GPU-hour %.4f\n",
                fx->samples / st->samples, fx->samples_per_gpu_hour / st->samples_per_gpu_hour);
  for (const auto& r : results)
    for (const auto& v : r.violations)
      std::printf("  INVARIANT VIOLATION (%s): %s\n", availability_policy_name(r.policy), v.c_str());
  return violated ? 1 : 0;
}

}  // namespace flotilla::cli
