#include "worker/runtime/launcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <utility>
#include <stdexcept>

#include "process/free_port.h"
#include "process/self_executable.h"
#include "process/stop_flag.h"
#include "worker/launch/start_job.h"
#include "worker/model/backend.h"
#include "worker/runtime/data_loader.h"
#include "worker/runtime/gpu_selection.h"
#include "worker/runtime/nccl_communicator.h"
#include "worker/runtime/run_summary.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/job_options.h"
#include "worker/runtime/trainer.h"

namespace flotilla::worker {
namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "flotilla-worker: error: %s\n", message.c_str());
  return code;
}

// Creates the checkpoint folder if needed; empty when it is a folder this process can write,
// else one line saying what is in the way.
std::string prepare_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return "--checkpoint-dir '" + dir + "' cannot be used as a folder (" +
           (ec ? ec.message() : std::string("not a directory")) +
           "); pass a folder path that is not a file and whose parent you can write";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "--checkpoint-dir '" + dir + "' is not writable (" + std::strerror(errno) +
           "); pass a folder you can write";
  return {};
}

// The ranks append to (progress) or rewrite (loss log) these files; opening one here without
// truncating it turns a missing folder into one line before any rank starts.
std::string check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty() || (flag == "--progress" && path == "-")) return {};
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return flag + " '" + path + "' cannot be opened for writing (" + std::strerror(errno) +
           "); pass a file in an existing folder you can write";
  ::close(fd);
  return {};
}

}  // namespace

int launcher_main(const std::string& mode, const std::vector<std::string>& args) {
  auto parsed = parse_job_options(args);
  if (auto* e = std::get_if<std::string>(&parsed)) return fail(*e, 2);
  const JobOptions& options = std::get<JobOptions>(parsed);
  // The local launcher forks every rank on this machine, each with its own model copy and
  // sockets; thousands of them swamp the host long before rendezvous could time out.
  constexpr int kMaxLocalRanks = 256;
  if (options.world_size > kMaxLocalRanks)
    return fail("--world-size " + std::to_string(options.world_size) +
                    ": the local launcher starts every rank on this machine and allows at most " +
                    std::to_string(kMaxLocalRanks) +
                    "; start ranks on several hosts with `flotilla-worker rank` instead",
                2);
  const bool cuda_backend = options.backend.rfind("cuda", 0) == 0;
  try {
    DataLoader probe(options.data_path, options.model.seq_len, options.train.seed);
  } catch (const std::exception& e) {
    return fail(e.what(), 2);
  }
  // What the ranks run with: --comm resolved, so every rank makes the same choice.
  JobOptions rank_options = options;
  const char* flotilla_gpus = std::getenv("FLOTILLA_VISIBLE_GPUS");
  const char* cuda_gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  int device_count = 0;
  if (cuda_backend) {
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
    device_count = cuda_device_count();
    const int gpus = distinct_gpus(options.world_size, flotilla_gpus, cuda_gpus, device_count);
    if (options.comm == "nccl" && !nccl_compiled())
      return fail("--comm nccl: this flotilla-worker was built without NCCL; use --comm tcp", 2);
    if (options.comm == "nccl" && gpus < options.world_size)
      return fail("--comm nccl needs one GPU per rank: " + std::to_string(options.world_size) +
                      " ranks but " + std::to_string(gpus) +
                      " distinct GPUs visible (FLOTILLA_VISIBLE_GPUS / CUDA_VISIBLE_DEVICES); "
                      "use --comm tcp or fewer ranks",
                  2);
    if (options.comm == "auto")
      rank_options.comm =
          nccl_compiled() && options.world_size > 1 && gpus >= options.world_size ? "nccl"
                                                                                  : "tcp";
  } else {
    rank_options.comm = "tcp";
  }
  if (std::string e = prepare_checkpoint_dir(options.checkpoint_dir); !e.empty()) return fail(e, 2);
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"--loss-log", options.loss_log},
                                   {"--progress", options.progress}})
    if (std::string e = check_output_file(flag, path); !e.empty()) return fail(e, 2);
  // The launch sequence (stop the running job on relaunch, check the checkpoint, lock, spawn)
  // is worker/launch/start_job.h, shared with the trainer sidecar.
  std::chrono::steady_clock::time_point started;
  JobStart request;
  request.checkpoint_dir = options.checkpoint_dir;
  request.stop_running_job = mode == "relaunch";
  request.identity = resume_identity(options);
  request.spawn = [&](process::ProcessGroup& group) {
    process::install_stop_handlers();
    std::error_code ignored;
    std::filesystem::remove(run_summary_path(options.checkpoint_dir), ignored);
    started = std::chrono::steady_clock::now();
    const std::string exe = process::self_executable();
    const std::string port = std::to_string(process::pick_free_port());
    std::vector<std::string> rank_args = {"rank"};
    auto job_args = to_args(rank_options);
    rank_args.insert(rank_args.end(), job_args.begin(), job_args.end());
    for (int r = 0; r < options.world_size; ++r) {
      std::map<std::string, std::string> env = {{"RANK", std::to_string(r)},
                                                {"LOCAL_RANK", std::to_string(r)},
                                                {"WORLD_SIZE", std::to_string(options.world_size)},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", port}};
      // GPU ranks see one device each: entry r of the visible list (gpu_selection.h).
      if (cuda_backend)
        if (auto gpu = gpu_for_local_rank(r, flotilla_gpus, cuda_gpus, device_count); !gpu.empty())
          env["CUDA_VISIBLE_DEVICES"] = gpu;
      group.spawn(exe, rank_args, env);
    }
  };
  request.on_stopped = [](pid_t stopped) {
    std::fprintf(stderr, "flotilla-worker: stopped launcher %d at a checkpoint\n",
                 static_cast<int>(stopped));
  };
  StartedJob job = start_job(request);
  if (!job.ok()) return fail(job.error, job.exit_code);
  process::ProcessGroup& group = *job.group;
  const std::chrono::milliseconds kill_grace(3000);
  auto result = group.wait_all(kill_grace);
  // One line a person (or a sidecar's log scraper) can read: how far this run got, where a
  // restart resumes, and the throughput.
  auto print_summary = [&] {
    auto latest = find_latest_complete(options.checkpoint_dir);
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "flotilla-worker: %s\n",
                 summary_line(read_run_summary(options.checkpoint_dir), options.steps,
                              latest ? latest->step : -1, wall_s, result.ok)
                     .c_str());
  };
  if (!result.ok) {
    int rank = 0;
    std::string hung;
    for (std::size_t i = 0; i < result.exits.size(); ++i) {
      if (result.exits[i].pid == result.first_failure->pid) rank = static_cast<int>(i);
      if (result.exits[i].killed_by_group) hung += (hung.empty() ? "" : ", ") + std::to_string(i);
    }
    const bool refused = result.first_failure->signal == 0 && result.first_failure->exit_code == 2;
    fail("rank " + std::to_string(rank) + " failed: " + result.first_failure->describe() +
             (refused ? std::string(" (its error is above: this layout cannot run as given)")
                      : " (its error is above); the job can resume from the last complete "
                        "checkpoint in '" + options.checkpoint_dir + "'"),
         1);
    if (!hung.empty())
      fail("rank(s) " + hung + " did not stop within " + std::to_string(kill_grace.count()) +
               " ms of SIGTERM and were killed with SIGKILL (hung or stopped?)",
           1);
    print_summary();
    // A rank that exits 2 refused its input (e.g. the model does not fit in its memory):
    // the job's answer is the same exit code as the launcher's own refusals.
    return refused ? 2 : 1;
  }
  print_summary();
  return 0;
}

int rank_main(const std::vector<std::string>& args) {
  int rank = -1;
  try {
    auto parsed = parse_job_options(args);
    if (auto* e = std::get_if<std::string>(&parsed)) throw std::runtime_error(*e);
    RendezvousConfig rz = rendezvous_from_env();
    rank = rz.rank;
    const JobOptions& options = std::get<JobOptions>(parsed);
    // One GPU per local rank also for starters other than our launcher (before any CUDA call).
    if (options.backend.rfind("cuda", 0) == 0) {
      const char* local = std::getenv("LOCAL_RANK");
      const int local_rank = local != nullptr ? std::atoi(local) : rz.rank;
      auto gpu = gpu_for_local_rank(local_rank, std::getenv("FLOTILLA_VISIBLE_GPUS"),
                                    std::getenv("CUDA_VISIBLE_DEVICES"), 0);
      if (!gpu.empty()) ::setenv("CUDA_VISIBLE_DEVICES", gpu.c_str(), 1);
    }
    process::install_stop_handlers();
    return run_rank(options, rz);
  } catch (const OutOfMemoryError& e) {
    // A job that does not fit is a layout problem like any other bad input: exit 2.
    std::fprintf(stderr, "flotilla-worker rank %d: error: %s\n", rank, e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "flotilla-worker rank %d: error: out of host memory (std::bad_alloc outside "
                 "the model's buffers, e.g. reading a checkpoint); give the rank more memory, "
                 "use a smaller model or more pipeline stages (--pp)\n",
                 rank);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flotilla-worker rank %d: error: %s\n", rank, e.what());
    return 1;
  }
}

}  // namespace flotilla::worker
