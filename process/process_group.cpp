#include "process/process_group.h"

#include <signal.h>

#include <cstring>
#include <thread>

#include "process/stop_flag.h"

namespace flotilla::process {

std::string ChildExit::describe() const {
  ExitStatus s;
  s.exit_code = exit_code;
  s.signal = signal;
  return s.describe(pid);
}

pid_t ProcessGroup::spawn(const std::string& program, const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& extra_env) {
  SpawnOptions options;
  options.argv = {program};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.env = extra_env;
  options.isolation = Isolation::kNone;
  options.parent_death_signal = SIGTERM;
  options.exec_failure = ExecFailure::kExit;  // a rank that cannot start fails like any rank
  return spawn(options);
}

pid_t ProcessGroup::spawn(const SpawnOptions& options) {
  children_.push_back(process::spawn(options));
  pids_.push_back(children_.back().pid());
  return pids_.back();
}

void ProcessGroup::signal_all(int sig) {
  for (auto& child : children_) child.signal(sig);
}

ProcessGroup::Result ProcessGroup::wait_all(std::chrono::milliseconds kill_grace) {
  Result result;
  result.exits.resize(children_.size());
  bool forwarded_stop = false;
  bool kill_pending = false;
  bool sent_kill = false;
  auto kill_at = std::chrono::steady_clock::now();
  std::vector<bool> done(children_.size(), false);
  std::size_t alive = children_.size();
  while (alive > 0) {
    if (stop_requested() && !forwarded_stop) {
      signal_all(SIGTERM);
      forwarded_stop = true;
    }
    if (kill_pending && std::chrono::steady_clock::now() >= kill_at) {
      signal_all(SIGKILL);
      kill_pending = false;
      sent_kill = true;
    }
    bool any = false;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      if (done[i]) continue;
      auto status = children_[i].poll();
      if (!status) continue;
      any = true;
      done[i] = true;
      --alive;
      ChildExit exit;
      exit.pid = children_[i].pid();
      exit.signal = status->signal;
      exit.exit_code = status->exit_code;
      exit.killed_by_group = sent_kill && exit.signal == SIGKILL;
      result.exits[i] = exit;
      if (!exit.ok() && !result.first_failure) {
        result.ok = false;
        result.first_failure = exit;
        signal_all(SIGTERM);
        kill_at = std::chrono::steady_clock::now() + kill_grace;
        kill_pending = true;
      }
    }
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return result;
}

}  // namespace flotilla::process
