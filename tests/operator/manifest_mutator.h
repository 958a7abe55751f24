// Mutated TrainingJob manifests for the fuzz tests: a valid job, then 1 to 4 random edits, each
// one of: delete a field, replace it with a value of another type, with an extreme or negative
// number, with a near-miss string (an unknown model or GPU type, a wrong enum), or add an unknown
// field. Edits aim at every path of the spec the CRD defines, so most mutants are refused by the
// API server's schema and the rest reach the operator with odd but valid values.
// Guarantees: deterministic for a seed (std::mt19937_64; no <random> distributions, whose output
//   differs between standard libraries).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace operator_fuzz {

inline nlohmann::json valid_job(const std::string& name, const std::string& data_path, const std::string& ckpt) {
  return {{"apiVersion", "flotilla.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"model", "small"},
            {"globalBatchSize", 8},
            {"trainSteps", 40},
            {"seed", 7},
            {"worker", {{"kind", "flotilla"}, {"image", "flotilla-worker:dev"}, {"data", data_path}}},
            {"checkpoint", {{"path", ckpt}, {"intervalSteps", 10}}},
            {"resources", {{"gpuTypes", {"emu-slow"}}, {"minGPUs", 1}, {"maxGPUs", 4}}},
            {"objective", "throughput"},
            {"elasticity",
             {{"mode", "strict"}, {"benefitThreshold", 0.6}, {"windowSeconds", 600}, {"minRescaleIntervalSeconds", 0}}},
            {"priority", 0}}}};
}

class ManifestMutator {
 public:
  explicit ManifestMutator(std::uint64_t seed) : rng_(seed) {}

  nlohmann::json mutate(nlohmann::json job) {
    const int edits = 1 + static_cast<int>(below(4));
    for (int i = 0; i < edits; ++i) {
      try {
        edit(job);
      } catch (const nlohmann::json::exception&) {
        // The path runs through a value an earlier edit made a scalar or an array: skip.
      }
    }
    return job;
  }

 private:
  std::uint64_t below(std::uint64_t n) { return rng_() % n; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  nlohmann::json odd_value() {
    switch (below(14)) {
      case 0: return nullptr;
      case 1: return -1;
      case 2: return 0;
      case 3: return 2147483648LL;                // int32 overflow
      case 4: return 9223372036854775807LL;       // int64 max
      case 5: return 1e300;
      case 6: return -0.5;
      case 7: return "";
      case 8: return std::string(300, 'x');        // over maxLength
      case 9: return nlohmann::json::array({1, "two", nullptr});
      case 10: return nlohmann::json::object({{"nested", {{"deeper", 1}}}});
      case 11: return true;
      case 12: return pick<std::string>({"Llama-3-8B", "GPT-3-175B", "no-such-model", "emu-fast", "A100-80",
                                         "relaxed", "off", "cost", "megatron", "../../etc/passwd", "ünïcødé"});
      default: return static_cast<std::int64_t>(below(100000)) - 50000;
    }
  }

  void edit(nlohmann::json& job) {
    static const std::vector<std::string> kPaths = {
        "/spec/model",          "/spec/globalBatchSize",   "/spec/trainSteps",        "/spec/seed",
        "/spec/worker",         "/spec/worker/kind",       "/spec/worker/image",      "/spec/worker/data",
        "/spec/checkpoint",     "/spec/checkpoint/path",   "/spec/checkpoint/intervalSteps",
        "/spec/resources",      "/spec/resources/gpuTypes", "/spec/resources/minGPUs", "/spec/resources/maxGPUs",
        "/spec/objective",      "/spec/elasticity/mode",   "/spec/elasticity/benefitThreshold",
        "/spec/elasticity/windowSeconds", "/spec/elasticity/minRescaleIntervalSeconds", "/spec/priority",
        "/spec",                "/spec/modelSpec",         "/spec/budget"};
    const nlohmann::json::json_pointer path(pick(kPaths));
    switch (below(5)) {
      case 0:  // delete
        if (job.contains(path)) job[path.parent_pointer()].erase(path.back());
        return;
      case 1:  // an inline model, sometimes absurd, for Megatron-LM (the reference worker trains only its own)
        job["spec"]["modelSpec"] = {{"numLayers", pick<std::int64_t>({1, 2, 4, 96, 30000, 0, -3})},
                                    {"hidden", pick<std::int64_t>({64, 100, 12288, 1, 1 << 30})},
                                    {"heads", pick<std::int64_t>({1, 3, 8, 96, 0})},
                                    {"vocabSize", pick<std::int64_t>({256, 50257, 1})},
                                    {"seqLen", pick<std::int64_t>({16, 2048, 1 << 20})}};
        if (job["spec"]["worker"].is_object()) {
          job["spec"]["worker"]["kind"] = "megatron";
          job["spec"]["worker"]["megatron"] = {{"script", "/opt/megatron-lm/pretrain_gpt.py"}};
        }
        return;
      case 2:  // an unknown field
        job[path.parent_pointer().empty() ? path : path.parent_pointer()]["fuzzExtra" + std::to_string(below(9))] =
            odd_value();
        return;
      default:  // replace
        job[path] = odd_value();
        return;
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace operator_fuzz
