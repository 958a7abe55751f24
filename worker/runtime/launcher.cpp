#include "worker/runtime/launcher.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "worker/model/backend.h"
#include "worker/runtime/data_loader.h"
#include "worker/runtime/job_options.h"
#include "worker/runtime/process_group.h"
#include "worker/runtime/trainer.h"

namespace flotilla::worker {
namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "flotilla-worker: error: %s\n", message.c_str());
  return code;
}

}  // namespace

int launcher_main(const std::string& mode, const std::vector<std::string>& args) {
  auto parsed = parse_job_options(args);
  if (auto* e = std::get_if<std::string>(&parsed)) return fail(*e, 2);
  const JobOptions& options = std::get<JobOptions>(parsed);
  try {
    DataLoader probe(options.data_path, options.model.seq_len, options.train.seed);
  } catch (const std::exception& e) {
    return fail(e.what(), 2);
  }
  if (options.backend.rfind("cuda", 0) == 0) {
    if (!cuda_compiled())
      return fail("--backend " + options.backend +
                      ": this flotilla-worker was built without CUDA (nvcc not found); use "
                      "--backend cpu",
                  2);
    if (cuda_device_count() == 0)
      return fail("--backend " + options.backend +
                      ": no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES); "
                      "use --backend cpu",
                  2);
  }
  if (mode == "relaunch") {
    pid_t stopped = 0;
    if (!stop_running_job(options.checkpoint_dir, std::chrono::minutes(10), &stopped))
      return fail("the running job on '" + options.checkpoint_dir +
                      "' did not stop within 10 minutes of SIGTERM",
                  1);
    if (stopped > 0)
      std::fprintf(stderr, "flotilla-worker: stopped launcher %d at a checkpoint\n",
                   static_cast<int>(stopped));
  }
  if (std::string e = check_resume_compatibility(options); !e.empty()) return fail(e, 2);
  pid_t holder = 0;
  std::optional<JobLock> lock;
  try {
    lock = JobLock::try_acquire(options.checkpoint_dir, &holder);
  } catch (const std::exception& e) {
    return fail(e.what(), 2);
  }
  if (!lock)
    return fail("another flotilla-worker launcher (pid " + std::to_string(holder) +
                    ") is running on '" + options.checkpoint_dir +
                    "'; use `flotilla-worker relaunch` to change its layout",
                2);
  install_stop_handlers();
  ProcessGroup group;
  try {
    const std::string exe = self_executable();
    const std::string port = std::to_string(pick_free_port());
    std::vector<std::string> rank_args = {"rank"};
    auto job_args = to_args(options);
    rank_args.insert(rank_args.end(), job_args.begin(), job_args.end());
    // GPU ranks get one visible device each, round-robin, unless the caller already chose.
    const int gpus = options.backend.rfind("cuda", 0) == 0 && std::getenv("CUDA_VISIBLE_DEVICES") == nullptr
                         ? cuda_device_count()
                         : 0;
    for (int r = 0; r < options.world_size; ++r) {
      std::map<std::string, std::string> env = {{"RANK", std::to_string(r)},
                                                {"LOCAL_RANK", std::to_string(r)},
                                                {"WORLD_SIZE", std::to_string(options.world_size)},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", port}};
      if (gpus > 0) env["CUDA_VISIBLE_DEVICES"] = std::to_string(r % gpus);
      group.spawn(exe, rank_args, env);
    }
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
  const std::chrono::milliseconds kill_grace(3000);
  auto result = group.wait_all(kill_grace);
  if (!result.ok) {
    int rank = 0;
    std::string hung;
    for (std::size_t i = 0; i < result.exits.size(); ++i) {
      if (result.exits[i].pid == result.first_failure->pid) rank = static_cast<int>(i);
      if (result.exits[i].killed_by_group) hung += (hung.empty() ? "" : ", ") + std::to_string(i);
    }
    fail("rank " + std::to_string(rank) + " failed: " + result.first_failure->describe() +
             " (its error is above); the job can resume from the last complete checkpoint in '" +
             options.checkpoint_dir + "'",
         1);
    if (!hung.empty())
      fail("rank(s) " + hung + " did not stop within " + std::to_string(kill_grace.count()) +
               " ms of SIGTERM and were killed with SIGKILL (hung or stopped?)",
           1);
    return 1;
  }
  return 0;
}

int rank_main(const std::vector<std::string>& args) {
  int rank = -1;
  try {
    auto parsed = parse_job_options(args);
    if (auto* e = std::get_if<std::string>(&parsed)) throw std::runtime_error(*e);
    RendezvousConfig rz = rendezvous_from_env();
    rank = rz.rank;
    install_stop_handlers();
    return run_rank(std::get<JobOptions>(parsed), rz);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla-worker rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}

}  // namespace flotilla::worker
