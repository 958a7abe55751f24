#pragma once
// Test helpers: a child process with its output in a file, a free loopback port, a temp dir,
// and a devcluster started as a real subprocess (flotilla-devcluster).
// Every process started here is killed in the destructor (SIGTERM, then SIGKILL after 1 s).
// Processes are started and reaped through flotilla::process (spawn.h, child.h).
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kube/client.h"
#include "process/child.h"

namespace flotilla::kube::testing {

namespace fs = std::filesystem;

int free_port();

struct TempDir {
  fs::path path;
  TempDir();
  ~TempDir();
};

class Subprocess {
 public:
  Subprocess(std::vector<std::string> argv, fs::path log_file);
  ~Subprocess();
  pid_t pid() const { return child_.valid() && !child_.exit_status() ? child_.pid() : -1; }
  bool running();
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status (or -signal).
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  void kill_now();  // SIGKILL and reap
  std::string output() const;
  const fs::path& log_file() const { return log_; }

 private:
  process::Child child_;
  int status_ = 0;
  fs::path log_;
  void record(const process::ExitStatus& s) { status_ = s.signal != 0 ? -s.signal : s.exit_code; }
};

// Path of the flotilla-devcluster binary ($FLOTILLA_DEVCLUSTER, else the build tree); "" when
// it is not built.
std::string devcluster_binary();

class Devcluster {
 public:
  // Starts on a free port with a fresh data dir; waits (bounded) until it serves.
  Devcluster();
  ~Devcluster();
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  // Stops (SIGTERM) and starts again on the same port and data dir.
  bool restart();
  // Stops, deletes the object store (keeping the PKI and token, so clients stay valid) and
  // starts again: a server whose resourceVersions start over, as after restoring a backup.
  bool restart_with_empty_store();
  void stop();
  bool start();
  std::shared_ptr<Client> client() const;
  Config config() const;
  const fs::path& kubeconfig_path() const { return kubeconfig_; }
  int port() const { return port_; }
  std::string log() const { return process_ ? process_->output() : ""; }

 private:
  TempDir dir_;
  fs::path kubeconfig_;
  int port_ = 0;
  std::unique_ptr<Subprocess> process_;
  bool ok_ = false;
  std::string error_;
};

}  // namespace flotilla::kube::testing
