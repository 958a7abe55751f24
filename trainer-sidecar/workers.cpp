#include "trainer-sidecar/workers.h"

#include <signal.h>

#include <fstream>

#include "common/text_file.h"
#include "process/spawn.h"
#include "trainer-sidecar/torchrun_failure.h"

namespace flotilla::sidecar {

std::string last_error_line(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line))
    if (line.find("error") != std::string::npos) found = line;
  return found;
}

std::string torchrun_log_failure(const std::filesystem::path& log) { return torchrun_failure_line(read_text(log)); }

void WorkerSet::start(const PodPlan& plan, const std::string& worker_binary,
                      const std::filesystem::path& work_dir, const RankLaunch& launch,
                      const std::string& master_addr, int master_port) {
  std::vector<std::string> argv = {worker_binary};
  auto args = worker_rank_args(plan, launch);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<WorkerProcess> processes;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i)
    processes.push_back({"local rank " + std::to_string(i), argv,
                         rank_env(plan, static_cast<int>(i), master_addr, master_port),
                         work_dir / ("rank-" + std::to_string(i) + ".log")});
  start(processes);
}

void WorkerSet::start(const std::vector<WorkerProcess>& processes) {
  ranks_.clear();
  failure_reported_ = false;
  all_exited_ = false;
  kill_at_.reset();
  for (const WorkerProcess& p : processes) {
    process::SpawnOptions o;
    o.argv = p.argv;
    o.env = p.env;
    o.isolation = process::Isolation::kGroup;
    o.parent_death_signal = SIGTERM;
    o.stdout_path = p.log;
    o.stderr_path = p.log;
    Rank r;
    r.label = p.label;
    r.log = p.log;
    r.failure_line = p.failure_line;
    r.child = process::spawn(o);  // on a throw, the Children already made kill themselves
    ranks_.push_back(std::move(r));
  }
}

WorkerPoll WorkerSet::poll() {
  WorkerPoll out;
  bool all = true, ok = true;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.status) r.status = r.child.poll();
    if (!r.status) {
      all = false;
      continue;
    }
    if (!r.status->ok()) {
      ok = false;
      if (!failure_reported_) {
        failure_reported_ = true;
        std::string line = r.failure_line(r.log);
        if (line.empty()) line = r.status->describe(r.child.pid());
        out.new_failure = r.label + ": " + line;
      }
    }
  }
  all_exited_ = all;
  out.all_exited = all;
  out.all_ok = all && ok;
  return out;
}

void WorkerSet::stop(std::chrono::milliseconds grace) {
  for (Rank& r : ranks_)
    if (!r.status) r.child.signal_group(SIGTERM);
  if (!kill_at_) kill_at_ = Clock::now() + grace;
}

void WorkerSet::kill_overdue() {
  if (!kill_at_ || Clock::now() < *kill_at_) return;
  for (Rank& r : ranks_)
    if (!r.status) r.child.signal_group(SIGKILL);
}

std::vector<pid_t> WorkerSet::pids() const {
  std::vector<pid_t> out;
  for (const Rank& r : ranks_) out.push_back(r.child.pid());
  return out;
}

}  // namespace flotilla::sidecar
