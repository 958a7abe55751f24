// A TrainingJob's spec as the operator reads it: the CR's `spec` (crds/) decoded into typed
// fields, with the checks the API server's schema cannot make.
//
// Guarantees: parse_job_spec() returns a spec whose every field is in range, or one line naming
//   the field path and what to fix ("spec.worker.data: required for worker kind flotilla").
//   The API server has already applied the CRD's defaults and structural checks; this repeats
//   the ones a missing default would break, so a CR stored before the schema changed is still
//   refused cleanly instead of crashing the reconcile.
// Assumes: `object` is the whole TrainingJob (metadata + spec).
// Caveats: pure; whether the model is known or fits is the planner's question (job_plan.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace flotilla::op {

enum class WorkerKind { kFlotilla, kMegatron };
enum class ElasticityMode { kStrict, kRelaxed, kOff };

struct InlineModel {
  int num_layers = 0;  // transformer blocks
  int hidden = 0;      // model width
  int heads = 0;       // attention heads; must divide hidden
  int vocab_size = 0;
  int seq_len = 0;     // tokens per sample
  int ffn_hidden = 0;  // 0: 4 x hidden
};

// spec.worker.megatron: what a Megatron-LM launch needs that the plan does not give
// (operator/megatron_launch.h turns it into launch::MegatronOptions).
struct MegatronSpec {
  std::string script;                            // absolute path of pretrain_gpt.py in the image (required)
  std::string tokenizer_type = "NullTokenizer";  // NullTokenizer: --vocab-size from the model
  std::string tokenizer_model;                   // --tokenizer-model when not empty
  double learning_rate = 3.0e-4;                 // --lr
};

struct JobSpec {
  std::string ns;
  std::string name;
  std::string uid;
  std::int64_t generation = 0;
  std::string creation_timestamp;
  std::string model;
  std::optional<InlineModel> model_spec;
  int global_batch_size = 0;
  std::int64_t train_steps = 0;
  std::int64_t seed = 1234;
  WorkerKind worker_kind = WorkerKind::kFlotilla;
  std::string worker_image;
  std::string worker_data;
  std::vector<std::string> worker_extra_args;
  // How long the sidecar waits for stopped workers (a coordinated checkpoint; Megatron's save on
  // SIGTERM) before SIGKILL; the pod's terminationGracePeriodSeconds leaves room for it.
  int stop_grace_seconds = 20;
  MegatronSpec megatron;  // read only for worker kind megatron
  std::string checkpoint_path;
  std::int64_t checkpoint_interval_steps = 10;
  nlohmann::json checkpoint_volume;    // a pod volume source, or null
  std::vector<std::string> gpu_types;  // empty: any
  int min_gpus = 1;
  int max_gpus = 0;  // 0: no cap
  bool objective_cost = false;
  std::optional<double> max_usd_per_hour;
  ElasticityMode elasticity = ElasticityMode::kStrict;
  double benefit_threshold = 0.6;
  double window_seconds = 28800;
  double min_rescale_interval_seconds = 60;
  // How long the pods of a new plan may take to start (their sidecars up) before those that have
  // not are left behind and the job re-plans without their nodes (unavailable_nodes.h); 0: wait
  // as long as it takes.
  int pod_start_timeout_seconds = 600;
  int priority = 0;
  int backoff_limit = 3;  // relaunches after failures without training progress (operator/crash_loop.h)

  std::string key() const { return ns + "/" + name; }
  // The model it trains: the preset name, plus the inline shape when one is given.
  std::string model_key() const;
};

// The cluster-wide scaling policy (operator flags): what a job gets for an `elasticity` field it
// leaves unset. The CRD carries no default for these, so the operator's flags decide.
struct PolicyDefaults {
  double benefit_threshold = 0.6;
  double window_seconds = 28800;
  double min_rescale_interval_seconds = 60;
  int pod_start_timeout_seconds = 600;
};

std::variant<JobSpec, std::string> parse_job_spec(const nlohmann::json& object, const PolicyDefaults& defaults = {});

const char* to_string(ElasticityMode mode);

}  // namespace flotilla::op
