#include "planner/sailor_plan.h"

#include <nlohmann/json.hpp>

#include <limits>

namespace flotilla::planner {
namespace {

using nlohmann::json;
using R = Result<SailorPlanFile>;

// A JSON integer in [lo, int max]; a larger one would wrap when narrowed to int.
bool int_at_least(const json& v, int lo, int& out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    if (v.get<unsigned long long>() > static_cast<unsigned long long>(std::numeric_limits<int>::max()))
      return false;
  } else {
    const long long x = v.get<long long>();
    if (x < lo || x > std::numeric_limits<int>::max()) return false;
  }
  out = v.get<int>();
  return out >= lo;
}

}  // namespace

Result<SailorPlanFile> parse_sailor_plan(std::string_view text, int num_blocks) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return R::failure(std::string("Sailor plan is not valid JSON: ") + e.what());
  }
  SailorPlanFile out;
  try {
    if (!j.is_object()) return R::failure("Sailor plan must be a JSON object");
    if (!j.contains("pipeline_list") || !j["pipeline_list"].is_array() || j["pipeline_list"].empty()) {
      return R::failure("Sailor plan: 'pipeline_list' is missing or empty");
    }
    if (j["pipeline_list"].size() > 1) {
      return R::failure("Sailor plan: more than one pipeline in 'pipeline_list' is not supported; give one");
    }
    for (const char* k : {"mbs", "gbs"}) {
      int& field = k[0] == 'm' ? out.plan.micro_batch_size : out.plan.global_batch_size;
      if (!j.contains(k) || !int_at_least(j[k], 1, field)) {
        return R::failure(std::string("Sailor plan: '") + k + "' is missing or not a positive integer (at most " +
                          std::to_string(std::numeric_limits<int>::max()) + ")");
      }
    }
    const json& p = j["pipeline_list"][0];
    if (!p.contains("layers_per_stage") || !p.contains("tmp_per_stage")) {
      return R::failure("Sailor plan: pipeline needs 'layers_per_stage' and 'tmp_per_stage'");
    }
    const json& layers = p["layers_per_stage"];
    const json& tmp = p["tmp_per_stage"];
    if (!layers.is_array() || !tmp.is_array() || layers.size() != tmp.size() || layers.empty()) {
      return R::failure("Sailor plan: 'layers_per_stage' and 'tmp_per_stage' must be equally long lists");
    }
    for (std::size_t s = 0; s < layers.size(); ++s) {
      const std::string id = "Sailor plan: stage " + std::to_string(s);
      Stage st;
      if (!layers[s].is_array() || layers[s].empty()) return R::failure(id + " has no layers");
      int prev = -1;
      for (const json& b : layers[s]) {
        int block = 0;
        if (!int_at_least(b, 0, block)) return R::failure(id + " has a layer that is not a non-negative integer: " + b.dump());
        if (prev >= 0 && block != prev + 1) return R::failure(id + " layers are not contiguous");
        prev = block;
      }
      st.first_block = layers[s].front().get<int>();
      st.last_block = layers[s].back().get<int>() + 1;
      if (!tmp[s].is_array() || tmp[s].empty()) return R::failure(id + " has no DP replicas in 'tmp_per_stage'");
      int tp = -1;
      for (const json& rep : tmp[s]) {
        // [[ [gpu, gpus_in_node, zone], ... ], tp]
        if (!rep.is_array() || rep.size() != 2 || !rep[0].is_array() || rep[0].empty() ||
            !rep[1].is_number_integer()) {
          return R::failure(id + ": each replica must be [[[gpu, gpus_in_node, zone], ...], tp]");
        }
        int rtp = 0;
        if (!int_at_least(rep[1], 1, rtp)) return R::failure(id + ": TP degree must be a positive integer, got " + rep[1].dump());
        if (tp < 0) tp = rtp;  // the stage's TP is its first replica's; others may differ
        const json& part = rep[0][0];
        if (!part.is_array() || part.size() < 2 || !part[0].is_string() || !part[1].is_number_integer()) {
          return R::failure(id + ": replica host entry must be [gpu, gpus_in_node, zone]");
        }
        Replica r;
        if (rtp != tp) r.tp = rtp;
        r.gpu_type = part[0].get<std::string>();
        if (!int_at_least(part[1], 1, r.gpus_per_node))
          return R::failure(id + ": gpus_in_node must be a positive integer, got " + part[1].dump());
        if (part.size() > 2 && part[2].is_string()) r.zone = part[2].get<std::string>();
        else if (j.contains("zone") && j["zone"].is_string()) r.zone = j["zone"].get<std::string>();
        for (std::size_t k = 1; k < rep[0].size(); ++k) {
          if (rep[0][k].is_array() && !rep[0][k].empty() && rep[0][k][0] != part[0]) {
            return R::failure(id + ": a replica spanning different GPU types is not supported");
          }
        }
        st.replicas.push_back(std::move(r));
      }
      st.tp = tp;
      out.plan.stages.push_back(std::move(st));
    }
    if (j.contains("real") && j["real"].is_number()) out.measured_iter_seconds = j["real"].get<double>();
    if (j.contains("red_grads") && j["red_grads"].is_number()) out.measured_sync_seconds = j["red_grads"].get<double>();
    if (j.contains("max_mem") && j["max_mem"].is_number()) out.measured_max_mem_bytes = j["max_mem"].get<std::int64_t>();
  } catch (const json::exception& e) {
    return R::failure(std::string("Sailor plan: unexpected field type: ") + e.what());
  }
  if (std::string err = validate_plan(out.plan, num_blocks); !err.empty()) {
    return R::failure("Sailor plan: " + err);
  }
  return out;
}

}  // namespace flotilla::planner
