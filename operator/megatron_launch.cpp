#include "operator/megatron_launch.h"

#include <algorithm>

#include "common/split_words.h"

namespace flotilla::op {
namespace {

// Flags Flotilla does not render but that would change the parallel layout or what a restart
// loads, so the plan or the resharded checkpoint would no longer be what runs.
constexpr const char* kLayoutFlags[] = {"--context-parallel-size",
                                        "--expert-model-parallel-size",
                                        "--expert-tensor-parallel-size",
                                        "--num-layers-per-virtual-pipeline-stage",
                                        "--num-virtual-stages-per-pipeline-rank",
                                        "--decoder-first-pipeline-num-layers",
                                        "--decoder-last-pipeline-num-layers",
                                        "--use-checkpoint-args",
                                        "--finetune"};

// "--save=/x" -> "--save"; a word that is no flag -> "".
std::string flag_name(const std::string& word) {
  if (word.rfind("--", 0) != 0) return "";
  return word.substr(0, word.find('='));
}

// One line when an extra argument sets a flag Flotilla owns, else "".
std::string check_extra_args(const std::vector<std::string>& extra, const std::vector<std::string>& rendered) {
  for (const std::string& word : extra) {
    const std::string flag = flag_name(word);
    if (flag.empty()) continue;
    if (std::find(rendered.begin(), rendered.end(), flag) != rendered.end())
      return "spec.worker.extraArgs sets " + flag +
             ", which Flotilla renders from the plan and the spec (remove it; see docs/operator.md)";
    if (std::find(std::begin(kLayoutFlags), std::end(kLayoutFlags), flag) != std::end(kLayoutFlags))
      return "spec.worker.extraArgs sets " + flag +
             ", which would change the parallel layout or what a restart loads; Flotilla does not plan it";
  }
  return "";
}

}  // namespace

launch::MegatronOptions megatron_options(const JobSpec& spec) {
  launch::MegatronOptions o;
  o.master_addr = "";  // the sidecars' rendezvous gives it per epoch
  o.script = spec.megatron.script;
  o.checkpoint_path = spec.checkpoint_path;
  o.save_interval_steps = static_cast<int>(std::min<std::int64_t>(spec.checkpoint_interval_steps, 1 << 30));
  o.train_steps = static_cast<int>(std::min<std::int64_t>(spec.train_steps, 1 << 30));
  o.learning_rate = spec.megatron.learning_rate;
  o.data_path = split_words(spec.worker_data);  // a prefix, or a blend "0.3 /d/a 0.7 /d/b"
  o.tokenizer_type = spec.megatron.tokenizer_type;
  o.tokenizer_model = spec.megatron.tokenizer_model;
  return o;
}

planner::Result<launch::MegatronLaunch> render_job_launch(const JobSpec& spec, const planner::PlaceResult& placed) {
  using R = planner::Result<launch::MegatronLaunch>;
  auto job = launch::megatron_job(placed);
  if (!job.ok()) return R::failure(job.error());
  auto rendered = launch::render_megatron(*job, megatron_options(spec));
  if (!rendered.ok()) return R::failure(rendered.error());
  launch::MegatronLaunch out = std::move(rendered).value();
  if (std::string why = check_extra_args(spec.worker_extra_args, out.megatron_args); !why.empty())
    return R::failure(why);
  out.megatron_args.insert(out.megatron_args.end(), spec.worker_extra_args.begin(), spec.worker_extra_args.end());
  for (launch::PodLaunch& pod : out.pods)
    pod.argv.insert(pod.argv.end(), spec.worker_extra_args.begin(), spec.worker_extra_args.end());
  return out;
}

}  // namespace flotilla::op
