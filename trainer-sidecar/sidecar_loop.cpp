#include "trainer-sidecar/sidecar_loop.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "common/pod_plan.h"
#include "common/significant_digits.h"
#include "common/text_file.h"
#include "kube/client.h"
#include "kube/clock.h"
#include "process/free_port.h"
#include "process/stop_flag.h"
#include "trainer-sidecar/megatron_progress.h"
#include "trainer-sidecar/pod_watch.h"
#include "trainer-sidecar/progress_summary.h"
#include "trainer-sidecar/progress_tail.h"
#include "trainer-sidecar/supervisor.h"
#include "trainer-sidecar/worker_args.h"
#include "trainer-sidecar/workers.h"
#include "worker/launch/checkpoint_folder.h"

namespace flotilla::sidecar {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kTick = 20ms;
constexpr auto kRendezvousPoll = 100ms;
constexpr auto kStopGrace = 20s;
constexpr const char* kMegatronImageNeed =
    "the megatron worker kind needs an image with Megatron-LM and PyTorch, e.g. nvcr.io/nvidia/pytorch with "
    "Megatron-LM at spec.worker.megatron.script (docs/sidecar.md)";

double unix_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void log_line(const std::string& s) { std::fprintf(stderr, "flotilla-sidecar: %s\n", s.c_str()); }

class Sidecar {
 public:
  Sidecar(Options o, std::shared_ptr<kube::Client> client)
      : o_(std::move(o)), client_(std::move(client)), watch_(client_, o_.pod_namespace, o_.pod_name) {
    cfg_.max_restarts = o_.max_restarts;
    fs::create_directories(o_.work_dir);
    events_.open(fs::path(o_.work_dir) / "sidecar-events.jsonl", std::ios::app);
    const char* ip = std::getenv("POD_IP");
    pod_ip_ = ip != nullptr && *ip != '\0' ? ip : "127.0.0.1";
  }

  int run() {
    while (!exit_code_) {
      observe();
      process_inputs();
      if (!exit_code_) publish_report(false);
      if (!exit_code_) std::this_thread::sleep_for(kTick);
    }
    return *exit_code_;
  }

 private:
  void event(const std::string& name, const kube::Json& extra = kube::Json::object()) {
    kube::Json j = extra;
    j["event"] = name;
    j["epoch"] = st_.epoch;
    j["time_unix_ms"] = unix_ms();
    events_ << j.dump() << '\n';
    events_.flush();
  }

  void feed(Input in) { pending_.push_back(std::move(in)); }

  void observe() {
    if (process::stop_requested() && !st_.shutting_down) feed(shutdown());
    observe_plan();
    observe_rendezvous();
    observe_progress();
    observe_workers();
    if (restart_at_ && Clock::now() >= *restart_at_) {
      restart_at_.reset();
      feed(restart_due());
    }
  }

  void observe_plan() {
    const kube::Json ann = watch_.annotations();
    const std::string text = ann.value(kPlanAnnotation, std::string());
    if (text.empty() || text == plan_text_) return;
    plan_text_ = text;
    auto parsed = parse_pod_plan(text);
    if (auto* e = std::get_if<std::string>(&parsed)) {
      log_line("ignoring a plan that does not parse: " + *e);
      return;
    }
    PodPlan plan = std::get<PodPlan>(std::move(parsed));
    if (plan.epoch < st_.epoch) return;  // stale: fenced by epoch
    const bool local = static_cast<int>(plan.ranks.size()) == plan.world_size;
    if (plan.epoch > st_.epoch) event("plan", {{"new_epoch", plan.epoch}});
    feed(plan_input(plan.epoch, plan.barrier, local));
    next_plan_ = std::move(plan);
  }

  void observe_rendezvous() {
    if (!awaiting_rdv_ || Clock::now() < next_rdv_poll_) return;
    next_rdv_poll_ = Clock::now() + kRendezvousPoll;
    auto pod = client_->get(kube::resources::pods, o_.pod_namespace, plan_->rendezvous_pod);
    if (pod.ok()) {
      const std::string text = pod->value("/metadata/annotations"_json_pointer, kube::Json::object())
                                   .value(kRendezvousAnnotation, std::string());
      auto rz = parse_rendezvous(text);
      if (auto* r = std::get_if<Rendezvous>(&rz); r != nullptr && r->epoch == st_.epoch) {
        awaiting_rdv_ = false;
        rdv_ = *r;
        feed(rendezvous_ready(r->epoch));
        return;
      }
    }
    if (Clock::now() >= rdv_deadline_) {
      awaiting_rdv_ = false;
      const std::string timeout_text = significant_digits_text(o_.rendezvous_timeout_s, 6);
      feed(rendezvous_timed_out(st_.epoch, "rendezvous of epoch " + std::to_string(st_.epoch) + ": pod " +
                                               plan_->rendezvous_pod + " did not publish its address within " +
                                               timeout_text + " s"));
    }
  }

  void observe_progress() {
    if (megatron()) return observe_megatron_progress();
    for (const std::string& line : tail_.read_new_lines()) {
      const bool first = !summary_.has_step();
      if (summary_.fold(line) && first) event("first_step", {{"step", summary_.completed_steps()}});
    }
    // A step, or the checkpoint this attempt resumed from (a finished job resumes at its end).
    if (summary_.completed_steps() > 0) step_ = summary_.completed_steps();
    best_step_ = std::max(best_step_, step_);
    if (summary_.has_step()) {
      loss_ = summary_.loss();
      tokens_per_s_ = summary_.tokens_per_second();
      stage_seconds_ = summary_.stage_seconds();
    }
    peak_bytes_ = std::max(peak_bytes_, summary_.peak_bytes());
  }

  // Megatron's training log line (printed by the last rank, so only its pod has one).
  void observe_megatron_progress() {
    for (const std::string& line : tail_.read_new_lines()) {
      const auto l = parse_megatron_log_line(line);
      if (!l) continue;
      if (!megatron_step_seen_) event("first_step", {{"step", l->iteration}});
      megatron_step_seen_ = true;
      step_ = l->iteration;
      best_step_ = std::max(best_step_, step_);
      if (l->lm_loss) loss_ = *l->lm_loss;
      tokens_per_s_ = megatron_tokens_per_second(*l, megatron_seq_length(*plan_));
    }
  }

  bool megatron() const { return plan_ && plan_->worker_kind == "megatron"; }
  bool stepped_this_attempt() const { return megatron() ? megatron_step_seen_ : summary_.has_step(); }

  // The newest complete checkpoint: the reference worker's step_<n>/DONE folders, or Megatron's
  // latest_checkpointed_iteration.txt (written once a save is complete).
  std::optional<std::int64_t> latest_checkpoint_step() const {
    if (!plan_) return std::nullopt;
    if (!megatron()) {
      const auto ck = worker::find_latest_complete(plan_->checkpoint_dir);
      return ck ? std::optional<std::int64_t>(ck->step) : std::nullopt;
    }
    const fs::path tracker = fs::path(plan_->checkpoint_dir) / "latest_checkpointed_iteration.txt";
    std::error_code ec;
    if (!fs::exists(tracker, ec)) return std::nullopt;
    try {
      return parse_megatron_tracker(read_text(tracker));
    } catch (const std::exception&) {
      return std::nullopt;  // being replaced: read again on the next report
    }
  }

  void observe_workers() {
    if (!workers_.running()) return;
    WorkerPoll p = workers_.poll();
    if (p.new_failure) {
      log_line(*p.new_failure);
      feed(worker_failed(*p.new_failure));
    }
    workers_.kill_overdue();
    if (p.all_exited) {
      observe_progress();
      event("workers_exited", {{"ok", p.all_ok}});
      const auto ck = latest_checkpoint_step();
      const bool reached = ck && *ck >= plan_->train_steps;
      const bool progressed = stepped_this_attempt() && step_ > best_step_at_spawn_;
      feed(workers_exited(p.all_ok, reached, !stepped_this_attempt(), progressed));
    }
  }

  void process_inputs() {
    while (!pending_.empty() && !exit_code_) {
      Input in = std::move(pending_.front());
      pending_.pop_front();
      if (in.kind == InputKind::kPlan && next_plan_ && next_plan_->epoch == in.epoch &&
          in.epoch >= st_.epoch && !st_.shutting_down) {
        plan_ = next_plan_;
        cfg_.max_restarts = plan_->max_local_restarts.value_or(o_.max_restarts);
      }
      const PodState before = st_.phase;
      SupervisorStep s = step(st_, in, cfg_);
      st_ = std::move(s.state);
      if (before != st_.phase)
        log_line(std::string("epoch ") + std::to_string(st_.epoch) + ": " + to_string(before) +
                 " -> " + to_string(st_.phase) + (st_.message.empty() ? "" : " (" + st_.message + ")"));
      for (const Action& a : s.actions) execute(a);
    }
  }

  void execute(const Action& a) {
    switch (a.kind) {
      case ActionKind::kRendezvous: return begin_rendezvous();
      case ActionKind::kSpawnWorkers: return spawn_workers();
      case ActionKind::kStopWorkers:
        event("stop_workers");
        workers_.stop(plan_ && plan_->stop_grace_seconds ? std::chrono::seconds(*plan_->stop_grace_seconds)
                                                         : kStopGrace);
        return;
      case ActionKind::kReport: return publish_report(true);
      case ActionKind::kScheduleRestart:
        restart_at_ = Clock::now() + std::chrono::milliseconds(a.delay_ms);
        return;
      case ActionKind::kExit:
        event("exit", {{"code", a.exit_code}});
        publish_report(true);
        exit_code_ = a.exit_code;
        return;
    }
  }

  void begin_rendezvous() {
    event("barrier_lifted");
    if (attempt_epoch_ != st_.epoch) {  // attempts and peaks are per epoch
      attempt_ = 0;
      peak_bytes_ = 0;
      summary_.reset(plan_->pp);  // or a poll before the spawn folds the old workers' peak back in
    }
    attempt_epoch_ = st_.epoch;
    ++attempt_;
    if (plan_->rendezvous_pod.empty() || plan_->rendezvous_pod == o_.pod_name) {
      Rendezvous r{st_.epoch, pod_ip_, process::pick_free_port()};
      kube::Json patch = {{"metadata", {{"annotations", {{kRendezvousAnnotation, encode_rendezvous(r)}}}}}};
      auto res = client_->patch(kube::resources::pods, o_.pod_namespace, o_.pod_name,
                                kube::PatchType::Merge, patch);
      if (!res.ok()) {
        feed(rendezvous_timed_out(st_.epoch, "cannot publish the rendezvous: " + res.error().describe()));
        return;
      }
      rdv_ = r;
      feed(rendezvous_ready(st_.epoch));
      return;
    }
    awaiting_rdv_ = true;
    next_rdv_poll_ = Clock::now();
    rdv_deadline_ = Clock::now() + std::chrono::milliseconds(static_cast<std::int64_t>(o_.rendezvous_timeout_s * 1000));
  }

  // The job's checkpoint folder (it also holds loss.log): created when missing; a folder the
  // pod cannot write is one line that says what to fix, reported as the worker failure.
  static void ensure_checkpoint_dir(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw std::runtime_error("cannot create the checkpoint folder '" + dir + "' (" + ec.message() +
                               "); make spec.checkpoint.path writable by the pods, e.g. a shared volume");
    if (::access(dir.c_str(), W_OK) != 0)
      throw std::runtime_error("the checkpoint folder '" + dir +
                               "' is not writable by the pods; fix its permissions or spec.checkpoint.path");
  }

  // The training text: a path every rank would fail on in the same way is one line in the
  // spec's terms, before any worker starts.
  static void ensure_data_file(const std::string& path) {
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw std::runtime_error("data file '" + path +
                               "' not found; fix spec.worker.data: a text file every pod can read");
    if (fs::is_directory(path, ec) || ::access(path.c_str(), R_OK) != 0)
      throw std::runtime_error("data file '" + path +
                               "' is not a readable file; fix spec.worker.data or the file's permissions");
  }

  void spawn_workers() {
    event("rendezvous_ready", {{"port", rdv_.port}});
    RankLaunch launch;
    launch.progress_path = (fs::path(o_.work_dir) / ("progress-e" + std::to_string(st_.epoch) + "-a" +
                                                     std::to_string(attempt_) + ".jsonl"))
                               .string();
    launch.connect_timeout_s = o_.rendezvous_timeout_s;
    summary_.reset(plan_->pp);
    tail_ = ProgressTail(launch.progress_path);
    best_step_at_spawn_ = best_step_;
    try {
      ensure_checkpoint_dir(plan_->checkpoint_dir);
      if (megatron()) {
        spawn_torchrun();
      } else {
        ensure_data_file(plan_->data_path);  // a Megatron data path may be a blend or empty (mock data)
        workers_.start(*plan_, o_.worker_binary, o_.work_dir, launch, rdv_.addr, rdv_.port);
      }
      event("spawned", {{"ranks", plan_->ranks}});
    } catch (const std::exception& e) {
      feed(worker_failed(std::string("cannot start the workers: ") + e.what()));
      feed(workers_exited(false, false, true));
    }
  }

  // Worker kind megatron: the pod's torchrun agent, its argv and environment in the event stream
  // first (what ran is on record even when the exec fails), its output tailed for Megatron's
  // log line. A missing torchrun or script is one line that says what the image lacks.
  void spawn_torchrun() {
    megatron_step_seen_ = false;
    const std::string script = plan_->megatron_args.front();
    WorkerProcess torchrun{
        "torchrun", megatron_pod_argv(*plan_, rdv_.addr, rdv_.port), megatron_pod_env(*plan_),
        fs::path(o_.work_dir) / ("torchrun-e" + std::to_string(st_.epoch) + "-a" + std::to_string(attempt_) + ".log")};
    torchrun.failure_line = torchrun_log_failure;
    tail_ = ProgressTail(torchrun.log.string());
    event("megatron_exec", {{"argv", torchrun.argv}, {"env", torchrun.env}});
    std::error_code ec;
    if (!fs::is_regular_file(script, ec))
      throw std::runtime_error("the Megatron-LM script '" + script + "' is not in this image: " + kMegatronImageNeed);
    try {
      workers_.start({torchrun});
    } catch (const std::system_error& e) {
      if (e.code().value() != ENOENT) throw;
      throw std::runtime_error(std::string("torchrun not found in PATH: ") + kMegatronImageNeed);
    }
  }

  PodReport report() const {
    PodReport r;
    r.epoch = st_.epoch;
    r.state = st_.phase;
    r.step = step_;
    r.loss = loss_;
    r.tokens_per_second = tokens_per_s_;
    if (auto ck = latest_checkpoint_step()) r.last_checkpoint_step = *ck;
    r.stage_seconds = stage_seconds_;
    // The peak belongs to the workers launched under attempt_epoch_: until the barrier of a new
    // plan lifts, they are the previous layout's, and the operator would read their peak as a
    // measurement of the new one.
    r.peak_bytes = attempt_epoch_ == st_.epoch ? peak_bytes_ : 0;
    r.restarts = st_.restarts;
    r.message = st_.message;
    return r;
  }

  void publish_report(bool now) {
    if (st_.epoch == 0) return;  // no plan yet: nothing to say
    PodReport r = report();
    const std::string key = encode_pod_report(r);
    const auto t = Clock::now();
    if (key == last_report_key_) return;
    if (!now && t - last_report_at_ < std::chrono::milliseconds(o_.report_interval_ms)) return;
    r.time = kube::format_rfc3339(std::chrono::system_clock::now());
    kube::Json patch = {{"metadata", {{"annotations", {{kReportAnnotation, encode_pod_report(r)}}}}}};
    for (int attempt = 0; attempt < (now ? 3 : 1); ++attempt) {
      auto res = client_->patch(kube::resources::pods, o_.pod_namespace, o_.pod_name,
                                kube::PatchType::Merge, patch);
      if (res.ok()) {
        last_report_key_ = key;
        last_report_at_ = t;
        event("report", {{"state", to_string(r.state)}, {"step", r.step}});
        return;
      }
      if (res.is(kube::ErrorKind::NotFound)) return;
      std::this_thread::sleep_for(100ms);
    }
  }

  Options o_;
  std::shared_ptr<kube::Client> client_;
  OwnPodWatch watch_;
  SupervisorConfig cfg_;
  SupervisorState st_;
  std::deque<Input> pending_;
  std::string plan_text_, pod_ip_;
  std::optional<PodPlan> plan_, next_plan_;
  WorkerSet workers_;
  ProgressTail tail_;
  ProgressSummary summary_;
  bool megatron_step_seen_ = false;  // a Megatron log line this attempt
  int attempt_ = 0;
  std::int64_t attempt_epoch_ = 0;
  bool awaiting_rdv_ = false;
  Clock::time_point rdv_deadline_, next_rdv_poll_;
  Rendezvous rdv_;
  std::optional<Clock::time_point> restart_at_;
  std::int64_t step_ = 0;
  std::int64_t best_step_ = 0;           // the highest step any attempt of this pod reached
  std::int64_t best_step_at_spawn_ = 0;  // ... before the current attempt (progress = beyond it)
  double loss_ = 0, tokens_per_s_ = 0;
  std::vector<StageSeconds> stage_seconds_;
  std::int64_t peak_bytes_ = 0;  // of this epoch's attempts
  std::string last_report_key_;
  Clock::time_point last_report_at_{};
  std::optional<int> exit_code_;
  std::ofstream events_;
};

}  // namespace

int run_sidecar(const Options& options) {
  process::install_stop_handlers();
  auto config = load_config(options);
  if (!config.ok()) {
    log_line("error: " + config.error().describe());
    return 2;
  }
  Options o = options;
  if (o.pod_namespace.empty()) o.pod_namespace = config->namespace_name;
  auto client = kube::Client::create(*config);
  if (!client.ok()) {
    log_line("error: " + client.error().describe());
    return 2;
  }
  log_line("pod " + o.pod_namespace + "/" + o.pod_name + ", work dir " + o.work_dir);
  Sidecar sidecar(o, *client);
  return sidecar.run();
}

}  // namespace flotilla::sidecar
