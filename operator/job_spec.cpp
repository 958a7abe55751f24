#include "operator/job_spec.h"

#include <limits>

#include "common/reference_models.h"
#include "planner/model_spec.h"

namespace flotilla::op {
namespace {

using Json = nlohmann::json;

// Reads spec fields by path; the first problem is kept as the answer.
class SpecReader {
 public:
  explicit SpecReader(const Json& spec) : spec_(spec) {}

  const Json* at(const std::string& path) {
    const Json* node = &spec_;
    std::size_t start = 0;
    while (start <= path.size()) {
      const std::size_t dot = path.find('.', start);
      const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object()) {
        // `resources: -0.5` is a mistake to name, not an absent block to default.
        if (start > 0) fail(path.substr(0, start - 1), "must be an object");
        return nullptr;
      }
      auto it = node->find(key);
      if (it == node->end() || it->is_null()) return nullptr;
      node = &*it;
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return node;
  }

  std::string str(const std::string& path, std::string fallback, bool required = false) {
    const Json* v = at(path);
    if (v == nullptr) return required ? fail(path, "required"), fallback : fallback;
    if (!v->is_string()) return fail(path, "must be a string"), fallback;
    return v->get<std::string>();
  }

  std::int64_t integer(const std::string& path, std::int64_t fallback, std::int64_t min, bool required = false) {
    const Json* v = at(path);
    if (v == nullptr) return required ? fail(path, "required"), fallback : fallback;
    if (!v->is_number_integer()) return fail(path, "must be an integer"), fallback;
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
      return fail(path, "must be at most " + std::to_string(std::numeric_limits<std::int64_t>::max())), fallback;
    const std::int64_t x = v->get<std::int64_t>();
    if (x < min) fail(path, "must be at least " + std::to_string(min) + ", got " + std::to_string(x));
    return x;
  }

  // An int field: an integer in [min, 2^31 - 1], since a wider value would wrap when narrowed.
  int int32(const std::string& path, int fallback, int min, bool required = false) {
    const std::int64_t x = integer(path, fallback, min, required);
    constexpr std::int64_t kMax = std::numeric_limits<int>::max();
    if (x > kMax) return fail(path, "must be at most " + std::to_string(kMax) + ", got " + std::to_string(x)), fallback;
    return static_cast<int>(x);
  }

  double number(const std::string& path, double fallback, double min, double max) {
    const Json* v = at(path);
    if (v == nullptr) return fallback;
    if (!v->is_number()) return fail(path, "must be a number"), fallback;
    const double x = v->get<double>();
    if (!(x >= min && x <= max)) fail(path, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    return x;
  }

  std::vector<std::string> strings(const std::string& path) {
    std::vector<std::string> out;
    const Json* v = at(path);
    if (v == nullptr) return out;
    if (!v->is_array()) return fail(path, "must be a list of strings"), out;
    for (const Json& e : *v) {
      if (!e.is_string()) return fail(path, "must be a list of strings"), out;
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  void fail(const std::string& path, const std::string& why) {
    if (error_.empty()) error_ = "spec." + path + ": " + why;
  }
  const std::string& error() const { return error_; }

 private:
  const Json& spec_;
  std::string error_;
};

std::optional<InlineModel> read_inline_model(SpecReader& r) {
  if (r.at("modelSpec") == nullptr) return std::nullopt;
  InlineModel m;
  m.num_layers = r.int32("modelSpec.numLayers", 0, 1, true);
  m.hidden = r.int32("modelSpec.hidden", 0, 1, true);
  m.heads = r.int32("modelSpec.heads", 0, 1, true);
  m.vocab_size = r.int32("modelSpec.vocabSize", 0, 1, true);
  m.seq_len = r.int32("modelSpec.seqLen", 0, 1, true);
  m.ffn_hidden = r.int32("modelSpec.ffnHidden", 0, 1);
  if (r.error().empty() && m.hidden % m.heads != 0) r.fail("modelSpec.heads", "must divide modelSpec.hidden");
  return m;
}

void read_megatron(SpecReader& r, MegatronSpec& m) {
  m.script = r.str("worker.megatron.script", "", true);
  if (r.error().empty() && (m.script.empty() || m.script[0] != '/'))
    r.fail("worker.megatron.script",
           "must be the absolute path of Megatron-LM's pretrain_gpt.py in the image, got '" + m.script + "'");
  m.tokenizer_type = r.str("worker.megatron.tokenizerType", m.tokenizer_type);
  if (r.error().empty() && m.tokenizer_type.empty()) r.fail("worker.megatron.tokenizerType", "must not be empty");
  m.tokenizer_model = r.str("worker.megatron.tokenizerModel", "");
  m.learning_rate = r.number("worker.megatron.learningRate", m.learning_rate, 0, 10);
  if (r.error().empty() && !(m.learning_rate > 0)) r.fail("worker.megatron.learningRate", "must be above 0");
}

// A stop longer than this holds a rescale (every pod waits for it) for longer than any save needs.
constexpr int kMaxStopGraceSeconds = 3600;

void read_worker(SpecReader& r, JobSpec& s) {
  const std::string kind = r.str("worker.kind", "flotilla");
  if (kind == "flotilla")
    s.worker_kind = WorkerKind::kFlotilla;
  else if (kind == "megatron")
    s.worker_kind = WorkerKind::kMegatron;
  else
    r.fail("worker.kind", "must be flotilla or megatron, got '" + kind + "'");
  s.worker_image = r.str("worker.image", "", true);
  s.worker_data = r.str("worker.data", "");
  s.worker_extra_args = r.strings("worker.extraArgs");
  s.stop_grace_seconds = r.int32("worker.stopGracePeriodSeconds", 20, 1);
  if (s.stop_grace_seconds > kMaxStopGraceSeconds)
    r.fail("worker.stopGracePeriodSeconds",
           "must be at most " + std::to_string(kMaxStopGraceSeconds) + " (one hour), got " +
               std::to_string(s.stop_grace_seconds));
  if (s.worker_kind == WorkerKind::kFlotilla && s.worker_data.empty())
    r.fail("worker.data", "required for worker kind flotilla (a text file the pods can read)");
  if (s.worker_kind == WorkerKind::kMegatron) read_megatron(r, s.megatron);
}

// What the pods can train: the reference worker knows only its own models, by their exact name
// (worker/model/config.cpp), so any other model would fail at launch, relaunch after backoff and
// end BackoffLimitExceeded; Megatron-LM trains any planner preset or an inline modelSpec. Either
// way a name the planner does not know is refused here, where the user's field can be named.
void check_model(SpecReader& r, const JobSpec& s) {
  if (!r.error().empty()) return;
  if (s.worker_kind == WorkerKind::kFlotilla) {
    if (s.model_spec) {
      r.fail("modelSpec", "worker kind flotilla trains only the reference worker's models (" + reference_model_names() +
                              "); an inline model needs worker.kind megatron");
      return;
    }
    for (const ReferenceModelShape& m : kReferenceModels)
      if (m.name == s.model) return;
    const auto preset = planner::find_preset(s.model);
    r.fail("model", "worker kind flotilla trains the reference worker's models (" + reference_model_names() +
                        "), not '" + s.model + "'" +
                        (preset ? "; " + preset->name + " runs with worker.kind megatron" : std::string()));
    return;
  }
  if (!s.model_spec && !planner::find_preset(s.model))
    r.fail("model", "unknown model '" + s.model + "': name a planner preset (" + planner::preset_names() +
                        ") or describe it in spec.modelSpec");
}

void read_policy(SpecReader& r, JobSpec& s, const PolicyDefaults& d) {
  s.gpu_types = r.strings("resources.gpuTypes");
  s.min_gpus = r.int32("resources.minGPUs", 1, 1);
  s.max_gpus = r.int32("resources.maxGPUs", 0, 1);
  if (s.max_gpus > 0 && s.max_gpus < s.min_gpus)
    r.fail("resources.maxGPUs", "must be at least resources.minGPUs (" + std::to_string(s.min_gpus) + ")");
  const std::string objective = r.str("objective", "throughput");
  if (objective != "throughput" && objective != "cost")
    r.fail("objective", "must be throughput or cost, got '" + objective + "'");
  s.objective_cost = objective == "cost";
  if (r.at("budget.maxUsdPerHour") != nullptr) s.max_usd_per_hour = r.number("budget.maxUsdPerHour", 0, 0, 1e12);
  const std::string mode = r.str("elasticity.mode", "strict");
  if (mode == "strict")
    s.elasticity = ElasticityMode::kStrict;
  else if (mode == "relaxed")
    s.elasticity = ElasticityMode::kRelaxed;
  else if (mode == "off")
    s.elasticity = ElasticityMode::kOff;
  else
    r.fail("elasticity.mode", "must be strict, relaxed or off, got '" + mode + "'");
  s.benefit_threshold = r.number("elasticity.benefitThreshold", d.benefit_threshold, 0, 1);
  s.window_seconds =
      static_cast<double>(r.integer("elasticity.windowSeconds", static_cast<std::int64_t>(d.window_seconds), 1));
  s.min_rescale_interval_seconds = static_cast<double>(r.integer(
      "elasticity.minRescaleIntervalSeconds", static_cast<std::int64_t>(d.min_rescale_interval_seconds), 0));
  s.pod_start_timeout_seconds = r.int32("elasticity.podStartTimeoutSeconds", d.pod_start_timeout_seconds, 0);
  s.priority = r.int32("priority", 0, -1000000000);
  s.backoff_limit = r.int32("backoffLimit", 3, 0);
}

}  // namespace

const char* to_string(ElasticityMode mode) {
  switch (mode) {
    case ElasticityMode::kStrict: return "strict";
    case ElasticityMode::kRelaxed: return "relaxed";
    case ElasticityMode::kOff: return "off";
  }
  return "?";
}

std::variant<JobSpec, std::string> parse_job_spec(const Json& object, const PolicyDefaults& defaults) {
  if (!object.is_object()) return std::string("the TrainingJob is not a JSON object");
  const Json meta = object.value("metadata", Json::object());
  auto spec_it = object.find("spec");
  if (spec_it == object.end() || !spec_it->is_object()) return std::string("spec: required");
  SpecReader r(*spec_it);
  JobSpec s;
  s.ns = meta.value("namespace", "default");
  s.name = meta.value("name", "");
  s.uid = meta.value("uid", "");
  s.generation = meta.value("generation", 0);
  s.creation_timestamp = meta.value("creationTimestamp", "");
  s.model = r.str("model", "", true);
  if (r.error().empty() && s.model.empty()) r.fail("model", "must name a preset or the inline modelSpec");
  s.model_spec = read_inline_model(r);
  s.global_batch_size = r.int32("globalBatchSize", 0, 1, true);
  s.train_steps = r.integer("trainSteps", 0, 1, true);
  s.seed = r.integer("seed", 1234, 0);
  read_worker(r, s);
  check_model(r, s);
  s.checkpoint_path = r.str("checkpoint.path", "", true);
  if (r.error().empty() && (s.checkpoint_path.empty() || s.checkpoint_path[0] != '/'))
    r.fail("checkpoint.path", "must be an absolute path, got '" + s.checkpoint_path + "'");
  s.checkpoint_interval_steps = r.integer("checkpoint.intervalSteps", 10, 1);
  if (const Json* v = r.at("checkpoint.volume")) {
    if (v->is_object())
      s.checkpoint_volume = *v;
    else
      r.fail("checkpoint.volume", "must be a pod volume source object, e.g. {persistentVolumeClaim: {claimName: x}}");
  }
  read_policy(r, s, defaults);
  if (!r.error().empty()) return r.error();
  return s;
}

std::string JobSpec::model_key() const {
  std::string key = model;
  if (model_spec) {
    const InlineModel& m = *model_spec;
    for (const int v : {m.num_layers, m.hidden, m.heads, m.vocab_size, m.seq_len, m.ffn_hidden})
      key += "," + std::to_string(v);
  }
  return key;
}

}  // namespace flotilla::op
