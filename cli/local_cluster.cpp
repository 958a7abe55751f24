#include "cli/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/crd_embed.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/net/http_client.h"
#include "kube/yaml_json.h"
#include "process/poll_until.h"
#include "process/free_port.h"
#include "process/proc_table.h"
#include "process/self_executable.h"
#include "process/spawn.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const kube::Resource kTrainingJobs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};

// Polls every 100 ms: the processes waited on take seconds to start or stop.
template <class Pred>
bool poll_until(Pred pred, std::chrono::milliseconds limit) {
  return process::poll_until(pred, limit, 100ms);
}

bool alive(pid_t pid, unsigned long long start_time) {
  if (pid <= 0) return false;
  // When this process started the cluster (flotilla demo, flotilla up in the foreground) the
  // programs are its children: reap one that exited, or it stays a zombie that kill(0) sees.
  if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
  if (::kill(pid, 0) != 0) return false;
  const auto t = process::process_start_time(pid);
  return t && *t == start_time;
}

void stop_recorded(pid_t pid, unsigned long long start_time, std::chrono::milliseconds grace) {
  if (!alive(pid, start_time)) return;
  ::kill(pid, SIGTERM);
  if (!poll_until([&] { return !alive(pid, start_time); }, grace)) ::kill(pid, SIGKILL);
  poll_until([&] { return !alive(pid, start_time); }, 2000ms);
}

std::string install_crd(kube::Client& client) {
  std::vector<Json> docs;
  std::string error;
  if (!kube::parse_yaml_documents(kTrainingJobCrdYaml, &docs, &error) || docs.empty())
    return "the embedded CRD does not parse: " + error;
  for (const Json& crd : docs) {
    auto created = client.create(kube::resources::custom_resource_definitions, "", crd);
    if (created) continue;
    if (!created.is(kube::ErrorKind::AlreadyExists)) return "installing the CRD failed: " + created.error().message;
    auto current = client.get(kube::resources::custom_resource_definitions, "", crd["metadata"].value("name", ""));
    if (!current) return "reading the installed CRD failed: " + current.error().message;
    Json updated = crd;
    updated["metadata"]["resourceVersion"] = (*current)["metadata"].value("resourceVersion", "");
    auto r = client.update(kube::resources::custom_resource_definitions, "", updated);
    if (!r) return "updating the CRD failed: " + r.error().message;
  }
  if (!poll_until([&] { return client.list(kTrainingJobs, "").ok(); }, 10s))
    return "the TrainingJob resource did not become servable within 10 s";
  return "";
}

std::string tail(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

std::string find_program(const std::string& name, const std::string& build_subdir) {
  const fs::path self = process::self_executable();
  for (const fs::path& p : {self.parent_path() / name, self.parent_path().parent_path() / build_subdir / name})
    if (fs::exists(p)) return fs::absolute(p).string();
  return name;
}

UpResult local_up(const UpOptions& o) {
  UpResult r;
  const fs::path dir = fs::absolute(o.dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return r.error = "cannot create --dir " + dir.string() + ": " + ec.message(), r;
  if (fs::exists(dir / "flotilla-up.json")) {
    std::ifstream in(dir / "flotilla-up.json");
    Json state = Json::parse(in, nullptr, false);
    if (state.is_object() && alive(state.value("devclusterPid", 0), state.value("devclusterStart", 0ull)))
      return r.error = "a local cluster already runs in " + dir.string() + "; run `flotilla down --dir " +
                       dir.string() + "` first",
             r;
  }
  const std::string devcluster = find_program("flotilla-devcluster", "devcluster");
  const std::string operator_bin = find_program("flotilla-operator", "operator");
  const std::string sidecar = find_program("flotilla-sidecar", "trainer-sidecar");
  const std::string worker = find_program("flotilla-worker", "worker");
  r.kubeconfig = (dir / "kubeconfig").string();
  fs::remove(r.kubeconfig, ec);

  process::SpawnOptions dc;
  dc.argv = {devcluster,
             "--listen",
             "127.0.0.1:0",
             "--nodes",
             fs::absolute(o.nodes_file).string(),
             "--data-dir",
             (dir / "data").string(),
             "--kubeconfig-out",
             r.kubeconfig};
  // The same catalog makes devcluster's nodes of its `emulated: true` types run at their speed
  // and within their memory (common/emulated_gpu.h), and the operator plan for them.
  if (!o.gpu_catalog.empty()) dc.argv.insert(dc.argv.end(), {"--gpu-catalog", fs::absolute(o.gpu_catalog).string()});
  dc.isolation = process::Isolation::kSession;
  dc.stdout_path = dc.stderr_path = dir / "devcluster.log";
  process::Child dc_child;
  try {
    dc_child = process::spawn(dc);
  } catch (const std::exception& e) {
    return r.error = std::string("cannot start flotilla-devcluster: ") + e.what(), r;
  }
  r.devcluster_pid = dc_child.pid();
  const auto dc_start = process::process_start_time(dc_child.pid()).value_or(0);
  auto fail = [&](const std::string& why) {
    r.error = why;
    dc_child.terminate(5000ms);
    return r;
  };
  if (!poll_until([&] { return fs::exists(r.kubeconfig) || !dc_child.running(); }, 20s) || !dc_child.running())
    return fail("flotilla-devcluster did not start: " + tail(dir / "devcluster.log") + " (" +
                (dir / "devcluster.log").string() + ")");
  auto config = kube::load_kubeconfig(r.kubeconfig);
  if (!config) return fail("cannot read " + r.kubeconfig + ": " + config.error().message);
  auto client = kube::Client::create(*config);
  if (!client) return fail("cannot reach devcluster: " + client.error().message);
  if (std::string e = install_crd(**client); !e.empty()) return fail(e);

  r.metrics_port = process::pick_free_port();
  const int health_port = process::pick_free_port();
  process::SpawnOptions op;
  op.argv = {operator_bin,
             "--kubeconfig",
             r.kubeconfig,
             "--metrics-addr",
             "127.0.0.1:" + std::to_string(r.metrics_port),
             "--health-addr",
             "127.0.0.1:" + std::to_string(health_port),
             "--sidecar-command",
             sidecar + " --kubeconfig " + r.kubeconfig + " --worker-binary " + worker};
  if (!o.benefit_check) op.argv.push_back("--no-benefit-check");
  if (o.arrival_window_s > 0)
    op.argv.insert(op.argv.end(), {"--arrival-window-seconds", std::to_string(o.arrival_window_s)});
  if (o.restart_overhead_s > 0)
    op.argv.insert(op.argv.end(), {"--restart-overhead-seconds", std::to_string(o.restart_overhead_s)});
  if (!o.gpu_catalog.empty()) op.argv.insert(op.argv.end(), {"--gpu-catalog", fs::absolute(o.gpu_catalog).string()});
  op.isolation = process::Isolation::kSession;
  op.stdout_path = op.stderr_path = dir / "operator.log";
  process::Child op_child;
  try {
    op_child = process::spawn(op);
  } catch (const std::exception& e) {
    return fail(std::string("cannot start flotilla-operator: ") + e.what());
  }
  r.operator_pid = op_child.pid();
  const auto op_start = process::process_start_time(op_child.pid()).value_or(0);
  kube::net::ClientConfig health;
  health.server = "http://127.0.0.1:" + std::to_string(health_port);
  health.connect_timeout = 1000ms;
  std::string http_error;
  auto http = kube::net::HttpClient::create(health, &http_error);
  auto ready = [&] {
    if (!http) return false;
    const kube::net::HttpResult resp = http->get("/readyz");
    return resp.ok() && resp.response.status == 200;
  };
  if (!poll_until([&] { return !op_child.running() || ready(); }, 20s) || !op_child.running()) {
    op_child.terminate(3000ms);
    return fail("flotilla-operator did not become ready: " + tail(dir / "operator.log") + " (" +
                (dir / "operator.log").string() + ")");
  }
  std::ofstream(dir / "flotilla-up.json") << Json{
      {"devclusterPid", r.devcluster_pid}, {"devclusterStart", dc_start},   {"operatorPid", r.operator_pid},
      {"operatorStart", op_start},         {"metricsPort", r.metrics_port}, {"healthPort", health_port},
      {"kubeconfig", r.kubeconfig}}.dump(2);
  dc_child.release();
  op_child.release();
  r.ok = true;
  return r;
}

std::string local_down(const std::string& dir_arg) {
  const fs::path dir = fs::absolute(dir_arg);
  std::ifstream in(dir / "flotilla-up.json");
  if (!in) return "no local cluster recorded in " + dir.string() + " (no flotilla-up.json)";
  const Json state = Json::parse(in, nullptr, false);
  if (!state.is_object()) return dir.string() + "/flotilla-up.json is not JSON; stop the processes by hand";
  stop_recorded(state.value("operatorPid", 0), state.value("operatorStart", 0ull), 10000ms);
  stop_recorded(state.value("devclusterPid", 0), state.value("devclusterStart", 0ull), 30000ms);
  std::error_code ec;
  fs::remove(dir / "flotilla-up.json", ec);
  return "";
}

}  // namespace flotilla::cli
