#include "common/pod_plan.h"

#include <nlohmann/json.hpp>

#include <set>

namespace flotilla {
namespace {

using Json = nlohmann::json;

constexpr const char* kStateNames[] = {"Waiting", "Starting",  "Running", "Stopping",
                                       "Stopped", "Succeeded", "Failed",  "Degraded"};

// Reads one field, or records why it cannot; the first error wins.
class Reader {
 public:
  Reader(const Json& object, std::string what) : object_(object), what_(std::move(what)) {}

  template <class T>
  T get(const char* key, T fallback, bool required) {
    if (!error_.empty()) return fallback;
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) {
      if (required) error_ = what_ + ": missing field '" + key + "'";
      return fallback;
    }
    if constexpr (std::is_same_v<T, std::string>) {
      if (it->is_string()) return it->template get<std::string>();
      error_ = what_ + ": field '" + key + "' must be a string";
    } else if constexpr (std::is_integral_v<T>) {
      if (it->is_number_integer()) return it->template get<T>();
      error_ = what_ + ": field '" + key + "' must be an integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      if (it->is_number()) return it->template get<T>();
      error_ = what_ + ": field '" + key + "' must be a number";
    } else {
      if (it->is_array()) {
        try {
          return it->template get<T>();
        } catch (const Json::exception&) {
        }
      }
      error_ = what_ + ": field '" + key + "' must be an array of the right element type";
    }
    return fallback;
  }

  void require(bool ok, const std::string& why) {
    if (error_.empty() && !ok) error_ = what_ + ": " + why;
  }
  const std::string& error() const { return error_; }

 private:
  const Json& object_;
  std::string what_;
  std::string error_;
};

std::variant<Json, std::string> parse_object(std::string_view text, const std::string& what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return what + ": not JSON";
  if (!j.is_object()) return what + ": must be a JSON object";
  return j;
}

}  // namespace

const char* to_string(PodState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<PodState> parse_pod_state(std::string_view text) {
  for (int i = 0; i < static_cast<int>(std::size(kStateNames)); ++i)
    if (text == kStateNames[i]) return static_cast<PodState>(i);
  return std::nullopt;
}

std::string encode_pod_plan(const PodPlan& p) {
  Json j = {{"job", p.job},
            {"epoch", p.epoch},
            {"barrier", p.barrier},
            {"workerKind", p.worker_kind},
            {"model", p.model},
            {"seed", p.seed},
            {"globalBatchSize", p.global_batch_size},
            {"microBatchSize", p.micro_batch_size},
            {"virtualShards", p.virtual_shards},
            {"trainSteps", p.train_steps},
            {"worldSize", p.world_size},
            {"pp", p.pp},
            {"dp", p.dp},
            {"tp", p.tp},
            {"partition", p.partition},
            {"data", p.data_path},
            {"checkpointDir", p.checkpoint_dir},
            {"checkpointEverySteps", p.checkpoint_every_steps},
            {"lossLog", p.loss_log},
            {"ranks", p.ranks},
            {"rendezvousPod", p.rendezvous_pod}};
  if (!p.megatron_args.empty()) j["megatronArgs"] = p.megatron_args;
  if (p.max_local_restarts) j["maxLocalRestarts"] = *p.max_local_restarts;
  if (p.stop_grace_seconds) j["stopGraceSeconds"] = *p.stop_grace_seconds;
  return j.dump();
}

std::vector<std::string> launch_differences(const PodPlan& launched, const PodPlan& wanted) {
  PodPlan aligned = wanted;
  aligned.epoch = launched.epoch;
  aligned.barrier = launched.barrier;
  const Json was = Json::parse(encode_pod_plan(launched));
  const Json now = Json::parse(encode_pod_plan(aligned));
  // Only fields the launched plan carries: one written by an older operator lacks the newer
  // optional fields (its sidecar ran their defaults), and an upgrade must not relaunch every job.
  std::set<std::string> keys;
  for (const auto& [key, value] : was.items()) keys.insert(key);
  const auto shown = [](const Json& plan, const std::string& key) {
    return plan.contains(key) ? plan[key].dump() : std::string("(unset)");
  };
  std::vector<std::string> out;
  for (const std::string& key : keys)
    if (shown(was, key) != shown(now, key)) out.push_back(key + ": " + shown(was, key) + " -> " + shown(now, key));
  return out;
}

// A torchrun agent runs `ranks.size()` consecutive ranks starting at a multiple of it, and
// every pod of the job the same count: the sidecar derives --node-rank and --nnodes from them.
void check_megatron(Reader& r, const PodPlan& p) {
  r.require(!p.megatron_args.empty() && !p.megatron_args.front().empty(),
            "megatronArgs must hold the script and its flags for workerKind megatron");
  const int g = static_cast<int>(p.ranks.size());
  bool consecutive = p.ranks.front() % g == 0 && p.world_size % g == 0;
  for (int i = 1; i < g; ++i) consecutive = consecutive && p.ranks[i] == p.ranks[0] + i;
  r.require(consecutive,
            "ranks of a megatron pod must be consecutive, start at a multiple of their count and divide worldSize");
}

std::variant<PodPlan, std::string> parse_pod_plan(std::string_view text) {
  auto parsed = parse_object(text, std::string(kPlanAnnotation));
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  const Json& j = std::get<Json>(parsed);
  Reader r(j, kPlanAnnotation);
  PodPlan p;
  p.job = r.get<std::string>("job", "", true);
  p.epoch = r.get<std::int64_t>("epoch", 0, true);
  p.barrier = r.get<std::int64_t>("barrier", 0, true);
  p.worker_kind = r.get<std::string>("workerKind", "flotilla", false);
  p.model = r.get<std::string>("model", "", true);
  p.seed = r.get<std::int64_t>("seed", 1234, false);
  p.global_batch_size = r.get<int>("globalBatchSize", 0, true);
  p.micro_batch_size = r.get<int>("microBatchSize", 0, true);
  p.virtual_shards = r.get<int>("virtualShards", 1, false);
  p.train_steps = r.get<std::int64_t>("trainSteps", 0, true);
  p.world_size = r.get<int>("worldSize", 0, true);
  p.pp = r.get<int>("pp", 0, true);
  p.dp = r.get<int>("dp", 0, true);
  p.tp = r.get<int>("tp", 1, false);
  p.partition = r.get<std::string>("partition", "", false);
  p.data_path = r.get<std::string>("data", "", false);
  p.checkpoint_dir = r.get<std::string>("checkpointDir", "", true);
  p.checkpoint_every_steps = r.get<std::int64_t>("checkpointEverySteps", 0, false);
  p.loss_log = r.get<std::string>("lossLog", "", false);
  p.ranks = r.get<std::vector<int>>("ranks", {}, true);
  p.rendezvous_pod = r.get<std::string>("rendezvousPod", "", true);
  p.megatron_args = r.get<std::vector<std::string>>("megatronArgs", {}, false);
  if (j.contains("maxLocalRestarts")) p.max_local_restarts = r.get<int>("maxLocalRestarts", 0, true);
  if (j.contains("stopGraceSeconds")) p.stop_grace_seconds = r.get<int>("stopGraceSeconds", 0, true);
  r.require(p.job.find('/') != std::string::npos, "job must be <namespace>/<name>");
  r.require(p.epoch >= 1, "epoch must be at least 1");
  r.require(p.barrier >= 0 && p.barrier <= p.epoch, "barrier must be between 0 and the epoch");
  r.require(p.worker_kind == "flotilla" || p.worker_kind == "megatron", "workerKind must be flotilla or megatron");
  r.require(p.global_batch_size >= 1 && p.micro_batch_size >= 1 && p.train_steps >= 1,
            "globalBatchSize, microBatchSize and trainSteps must be at least 1");
  r.require(p.virtual_shards >= 1 && p.dp >= 1 && p.virtual_shards % p.dp == 0, "virtualShards must be a multiple of dp");
  r.require(p.pp >= 1 && p.dp >= 1 && p.tp >= 1 && p.world_size == p.pp * p.dp * p.tp,
            "worldSize must be pp x dp x tp, each at least 1");
  r.require(!p.ranks.empty(), "ranks must name at least one global rank");
  for (int rank : p.ranks) r.require(rank >= 0 && rank < p.world_size, "rank outside 0..worldSize-1");
  r.require(!p.rendezvous_pod.empty(), "rendezvousPod must name a pod");
  r.require(!p.max_local_restarts || *p.max_local_restarts >= 0, "maxLocalRestarts must be at least 0");
  r.require(!p.stop_grace_seconds || *p.stop_grace_seconds >= 1, "stopGraceSeconds must be at least 1");
  if (p.worker_kind == "megatron") check_megatron(r, p);
  if (!r.error().empty()) return r.error();
  return p;
}

std::string encode_pod_report(const PodReport& r) {
  Json stages = Json::array();
  for (const StageSeconds& s : r.stage_seconds)
    stages.push_back({{"stage", s.stage}, {"forwardSeconds", s.forward_s}, {"backwardSeconds", s.backward_s}});
  Json j = {{"epoch", r.epoch},
            {"state", to_string(r.state)},
            {"step", r.step},
            {"loss", r.loss},
            {"tokensPerSecond", r.tokens_per_second},
            {"lastCheckpointStep", r.last_checkpoint_step},
            {"stageSeconds", stages},
            {"restarts", r.restarts},
            {"peakBytes", r.peak_bytes},
            {"message", r.message},
            {"time", r.time}};
  return j.dump();
}

std::variant<PodReport, std::string> parse_pod_report(std::string_view text) {
  auto parsed = parse_object(text, std::string(kReportAnnotation));
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  const Json& j = std::get<Json>(parsed);
  Reader r(j, kReportAnnotation);
  PodReport out;
  out.epoch = r.get<std::int64_t>("epoch", 0, true);
  const std::string state = r.get<std::string>("state", "", true);
  out.step = r.get<std::int64_t>("step", 0, false);
  out.loss = r.get<double>("loss", 0, false);
  out.tokens_per_second = r.get<double>("tokensPerSecond", 0, false);
  out.last_checkpoint_step = r.get<std::int64_t>("lastCheckpointStep", -1, false);
  out.restarts = r.get<int>("restarts", 0, false);
  out.peak_bytes = r.get<std::int64_t>("peakBytes", 0, false);
  out.message = r.get<std::string>("message", "", false);
  out.time = r.get<std::string>("time", "", false);
  if (!r.error().empty()) return r.error();
  auto parsed_state = parse_pod_state(state);
  if (!parsed_state) return std::string(kReportAnnotation) + ": unknown state '" + state + "'";
  out.state = *parsed_state;
  if (auto it = j.find("stageSeconds"); it != j.end() && it->is_array()) {
    for (const Json& s : *it) {
      if (!s.is_object()) return std::string(kReportAnnotation) + ": stageSeconds entries must be objects";
      Reader sr(s, std::string(kReportAnnotation) + " stageSeconds");
      StageSeconds st;
      st.stage = sr.get<int>("stage", 0, true);
      st.forward_s = sr.get<double>("forwardSeconds", 0, true);
      st.backward_s = sr.get<double>("backwardSeconds", 0, true);
      if (!sr.error().empty()) return sr.error();
      out.stage_seconds.push_back(st);
    }
  }
  return out;
}

std::string encode_rendezvous(const Rendezvous& rv) {
  return Json{{"epoch", rv.epoch}, {"addr", rv.addr}, {"port", rv.port}}.dump();
}

std::variant<Rendezvous, std::string> parse_rendezvous(std::string_view text) {
  auto parsed = parse_object(text, std::string(kRendezvousAnnotation));
  if (auto* error = std::get_if<std::string>(&parsed)) return *error;
  Reader r(std::get<Json>(parsed), kRendezvousAnnotation);
  Rendezvous rv;
  rv.epoch = r.get<std::int64_t>("epoch", 0, true);
  rv.addr = r.get<std::string>("addr", "", true);
  rv.port = r.get<int>("port", 0, true);
  r.require(rv.port >= 1 && rv.port <= 65535, "port must be 1..65535");
  r.require(!rv.addr.empty(), "addr must not be empty");
  if (!r.error().empty()) return r.error();
  return rv;
}

}  // namespace flotilla
