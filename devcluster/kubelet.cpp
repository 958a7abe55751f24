#include "devcluster/kubelet.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "devcluster/nodes_file.h"
#include "devcluster/quantity.h"
#include "devcluster/selectors.h"
#include "kube/object.h"
#include "process/group_signal.h"
#include "process/proc_table.h"
#include "process/reap.h"
#include "process/spawn.h"

namespace flotilla::devcluster {
namespace {

using Clock = std::chrono::steady_clock;

int gpu_request(const Json& pod) {
  int total = 0;
  for (const Json& v : kube::pod_gpu_quantities(pod))
    // Saturating: "99999999999999999999" GPUs fits no node (Unschedulable), never 0 GPUs.
    if (auto q = quantity_value(v)) total = saturated_count(static_cast<long double>(total) + saturated_count(*q));
  return total;
}

int node_gpus(const Json& node) {
  std::string v = node.value("/status/allocatable"_json_pointer, Json::object()).value("nvidia.com/gpu", "0");
  try {
    return std::stoi(v);
  } catch (...) {
    return 0;
  }
}

bool node_failed(const Json& node) {
  return node["metadata"].value("annotations", Json::object()).value(kFailedAnnotation, "") == "true";
}

bool node_ready(const Json& node) {
  for (const auto& c : node.value("/status/conditions"_json_pointer, Json::array()))
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  return false;
}

bool match_node_expression(const Json& expr, const Json& labels, const std::string& node_name, bool field) {
  std::string key = expr.value("key", "");
  std::string op = expr.value("operator", "");
  bool has = field ? key == "metadata.name" : labels.contains(key);
  std::string value = field ? node_name : (has ? labels[key].get<std::string>() : "");
  std::vector<std::string> values = expr.value("values", std::vector<std::string>{});
  bool in = has && std::find(values.begin(), values.end(), value) != values.end();
  if (op == "In") return in;
  if (op == "NotIn") return !in;
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if ((op == "Gt" || op == "Lt") && has && !values.empty()) {
    try {
      long long a = std::stoll(value), b = std::stoll(values[0]);
      return op == "Gt" ? a > b : a < b;
    } catch (...) {
      return false;
    }
  }
  return false;
}

// Why the node does not fit the pod ("" when it fits, ignoring GPU capacity).
std::string node_mismatch(const Json& pod, const Json& node) {
  const Json& labels = node["metadata"].value("labels", Json::object());
  std::string name = node["metadata"].value("name", "");
  if (node_failed(node) || !node_ready(node)) return "node(s) were not ready";
  if (node.value("/spec/unschedulable"_json_pointer, false)) return "node(s) were unschedulable";
  const Json spec = pod.value("spec", Json::object());
  const Json selector = spec.value("nodeSelector", Json::object());
  for (auto& [k, v] : selector.items())
    if (!labels.contains(k) || labels[k] != v) return "node(s) didn't match Pod's node affinity/selector";
  const Json terms = pod.value("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"_json_pointer,
                               Json::array());
  if (!terms.empty()) {
    bool any = false;
    for (const auto& term : terms) {
      bool all = true;
      for (const auto& e : term.value("matchExpressions", Json::array())) all = all && match_node_expression(e, labels, name, false);
      for (const auto& e : term.value("matchFields", Json::array())) all = all && match_node_expression(e, labels, name, true);
      any = any || all;
    }
    if (!any) return "node(s) didn't match Pod's node affinity/selector";
  }
  for (const auto& taint : node.value("/spec/taints"_json_pointer, Json::array())) {
    std::string effect = taint.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    bool tolerated = false;
    for (const auto& t : spec.value("tolerations", Json::array())) {
      bool key_ok = t.value("key", "") == "" || t.value("key", "") == taint.value("key", "");
      bool value_ok = t.value("operator", "Equal") == "Exists" || t.value("value", "") == taint.value("value", "");
      bool effect_ok = t.value("effect", "") == "" || t.value("effect", "") == effect;
      tolerated = tolerated || (key_ok && value_ok && effect_ok);
    }
    if (!tolerated) return "node(s) had untolerated taint {" + taint.value("key", "") + ": " + taint.value("value", "") + "}";
  }
  return "";
}

std::string expand(const std::string& text, const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '(') {
      size_t close = text.find(')', i);
      if (close != std::string::npos) {
        std::string name = text.substr(i + 2, close - i - 2);
        auto it = std::find_if(env.rbegin(), env.rend(), [&](const auto& kv) { return kv.first == name; });
        if (it != env.rend()) {
          out += it->second;
          i = close;
          continue;
        }
      }
    }
    out += text[i];
  }
  return out;
}

// The environment entry that marks every process of one container, inherited by everything
// it starts: it survives setsid(), setpgid() and reparenting, so it finds descendants that
// left the container's session (see docs/devcluster.md, "Orphans").
constexpr const char* kContainerMarker = "FLOTILLA_DEVCLUSTER_CONTAINER";

std::string marker_entry(const std::string& uid, const std::string& container) {
  return std::string(kContainerMarker) + "=" + uid + "/" + container;
}

// Every live process that belongs to the container whose session leader was `leader`
// (started at `leader_start`, /proc stat field 22): members of its session or group and
// descendants of the leader, started no earlier than it (a reused pid cannot pass), and any
// process carrying the container's environment marker.
std::vector<pid_t> container_processes(pid_t leader, unsigned long long leader_start,
                                       const std::string& marker) {
  const auto table = process::list_processes();
  const pid_t self = ::getpid();
  bool leader_reused = false;
  for (const auto& s : table)
    if (s.pid == leader && s.start_time != leader_start) leader_reused = true;
  std::set<pid_t> tree;
  if (!leader_reused && leader > 1)
    for (pid_t d : process::descendants(leader, table)) tree.insert(d);
  std::vector<pid_t> out;
  for (const auto& s : table) {
    if (s.pid <= 1 || s.pid == self || s.state == 'Z' || s.state == 'X') continue;
    bool ours = false;
    if (!leader_reused && leader > 1 && s.start_time >= leader_start)
      ours = s.pid == leader || s.sid == leader || s.pgid == leader || tree.count(s.pid) > 0;
    if (!ours && !marker.empty()) ours = process::environ_has(s.pid, marker);
    if (ours) out.push_back(s.pid);
  }
  return out;
}

// Signals the container's group and every process container_processes() finds; with SIGKILL,
// looks again (bounded) until nothing is left, so a process forking in a loop cannot escape
// between the scan and the kill. Returns how many processes it signalled.
// `leader_unreaped`: the leader is our child and not reaped yet, so its group id is still ours
// and the group can be signalled directly (else only what the scan finds is signalled).
int signal_container(pid_t leader, unsigned long long leader_start, const std::string& marker, int sig,
                     bool leader_unreaped) {
  if (leader_unreaped && leader > 1) process::signal_group(leader, sig);
  int signalled = 0;
  for (int pass = 0; pass < (sig == SIGKILL ? 20 : 1); ++pass) {
    auto victims = container_processes(leader, leader_start, marker);
    if (victims.empty()) break;
    for (pid_t p : victims)
      if (::kill(p, sig) == 0) ++signalled;
    if (sig == SIGKILL) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return signalled;
}

}  // namespace

Kubelet::Kubelet(Api& api, KubeletOptions options)
    : api_(api), options_(std::move(options)), builtin_registry_(api_.registry()) {
  pods_ = builtin_registry_->find("", "v1", "pods");
  nodes_ = builtin_registry_->find("", "v1", "nodes");
}

Kubelet::~Kubelet() { stop(); }

void Kubelet::start() {
  reap_previous_run();
  {
    auto lock = api_.store().lock();
    cursor_ = api_.store().rv_locked();
  }
  full_resync();
  thread_ = std::thread([this] { loop(); });
}

void Kubelet::stop() {
  if (stopping_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  // Terminate everything we started: SIGTERM, then SIGKILL.
  std::lock_guard lock(mutex_);
  for (auto& [uid, run] : runs_) kill_run(run, SIGTERM);
  auto deadline = Clock::now() + options_.shutdown_grace;
  for (;;) {
    bool any = false;
    for (auto& [pid, where] : pid_index_)
      if (pid > 0 && !process::has_exited(pid)) any = true;
    if (!any || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Nothing is reaped yet, so every leader's ids are still ours.
  for (auto& [uid, run] : runs_) kill_run(run, SIGKILL);
  for (auto& [pid, where] : pid_index_) {
    process::signal_group(pid, SIGKILL);  // also containers of pods already forgotten
    process::reap(pid);
  }
  pid_index_.clear();
  for (auto& [uid, run] : runs_)
    for (auto& c : run.containers) c.running = false;
  save_process_records();
}

std::string Kubelet::log_path(const std::string& ns, const std::string& pod, const std::string& container) const {
  Outcome o = api_.get(*pods_, ns, pod);
  if (!o.ok()) return "";
  std::string uid = o.object["metadata"].value("uid", "");
  return (options_.pods_dir / ns / (pod + "-" + uid.substr(0, 8)) / (container + ".log")).string();
}

void Kubelet::full_resync() {
  std::vector<std::pair<std::string, std::string>> pods;
  std::vector<std::string> nodes;
  {
    auto lock = api_.store().lock();
    for (const auto& [key, obj] : api_.store().list_locked("/pods", ""))
      pods.emplace_back((*obj)["metadata"].value("namespace", ""), (*obj)["metadata"].value("name", ""));
    for (const auto& [key, obj] : api_.store().list_locked("/nodes", "")) nodes.push_back((*obj)["metadata"].value("name", ""));
  }
  std::lock_guard lock(mutex_);
  // Runs whose pods vanished while we were not looking.
  for (auto it = runs_.begin(); it != runs_.end();) {
    Outcome o = api_.get(*pods_, it->second.ns, it->second.name);
    if (!o.ok() || o.object["metadata"].value("uid", "") != it->first) {
      kill_run(it->second, SIGKILL);
      forget_probes(it->second);
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& n : nodes) handle_node(n);
  for (const auto& [ns, name] : pods) handle_pod_guarded(ns, name);
  pending_dirty_ = gc_dirty_ = true;
}

void Kubelet::loop() {
  last_schedule_ = last_gc_ = Clock::now();
  std::vector<EventPtr> events;
  while (!stopping_.load()) {
    events.clear();
    bool expired = false;
    {
      auto lock = api_.store().lock();
      api_.store().wait_locked(lock, cursor_, options_.tick);
      expired = !api_.store().events_since_locked(cursor_, &events);
      if (expired) cursor_ = api_.store().rv_locked();
    }
    if (expired) {
      full_resync();
      continue;
    }
    std::set<std::pair<std::string, std::string>> pods, nodes;
    for (const auto& ev : events) {
      cursor_ = ev->rv;
      if (ev->resource == "/pods") pods.emplace(ev->ns, ev->name);
      else if (ev->resource == "/nodes") nodes.emplace("", ev->name);
      if (ev->type == "DELETED" || ev->resource == "/namespaces" ||
          (ev->type == "MODIFIED" && (*ev->object)["metadata"].contains("deletionTimestamp")))
        gc_dirty_ = true;
    }
    std::lock_guard lock(mutex_);
    for (const auto& n : nodes) handle_node(n.second);
    for (const auto& p : pods) handle_pod_guarded(p.first, p.second);
    if (!nodes.empty()) pending_dirty_ = true;
    reap_children();
    timers();
    apply_probe_results();
    auto now = Clock::now();
    // A bug met on one object must cost that pass, never the server (an uncaught exception
    // here aborted devcluster; the fuzz test found one in binding a pod without status).
    auto guarded = [](const char* what, const std::function<void()>& pass) {
      try {
        pass();
      } catch (const std::exception& e) {
        std::cerr << std::string("flotilla-devcluster: kubelet: ") + what + " failed: " + e.what() + "; retrying later\n"
                  << std::flush;
      }
    };
    if (!pending_.empty() && (pending_dirty_ || now - last_schedule_ > std::chrono::seconds(1)))
      guarded("scheduling", [&] { schedule_pending(); });
    if (gc_dirty_ && now - last_gc_ > std::chrono::milliseconds(100)) guarded("garbage collection", [&] { gc_pass(); });
  }
}

void Kubelet::handle_pod_guarded(const std::string& ns, const std::string& name) {
  try {
    handle_pod(ns, name);
  } catch (const std::exception& e) {
    // The API refuses such pods at write time; this guards objects from older data dirs.
    std::string why = std::string("devcluster cannot read this pod: ") + e.what();
    std::cerr << "flotilla-devcluster: kubelet: pod " + ns + "/" + name + ": " + why + "; marking it Failed\n" << std::flush;
    try {
      api_.mutate(*pods_, ns, name, [&](Json& p) {
        if (p.value("/status/phase"_json_pointer, Json()) == "Failed") return false;
        if (!p["status"].is_object()) p["status"] = Json::object();
        p["status"]["phase"] = "Failed";
        p["status"]["reason"] = "InvalidPodSpec";
        p["status"]["message"] = why;
        return true;
      });
    } catch (const std::exception& e2) {
      std::cerr << "flotilla-devcluster: kubelet: pod " + ns + "/" + name + " cannot be marked Failed either: " + e2.what() +
                       "\n" << std::flush;
    }
  }
}

void Kubelet::handle_pod(const std::string& ns, const std::string& name) {
  Outcome o = api_.get(*pods_, ns, name);
  std::string key = ns + "/" + name;
  if (!o.ok()) {
    pending_.erase(key);
    for (auto it = runs_.begin(); it != runs_.end(); ++it)
      if (it->second.ns == ns && it->second.name == name) {
        kill_run(it->second, SIGKILL);
        forget_probes(it->second);
        runs_.erase(it);
        pending_dirty_ = true;
        break;
      }
    return;
  }
  const Json& pod = o.object;
  std::string uid = pod["metadata"].value("uid", "");
  auto run = runs_.find(uid);
  if (pod["metadata"].contains("deletionTimestamp")) {
    pending_.erase(key);
    pulling_.erase(uid);
    bool live = false;
    if (run != runs_.end())
      for (const auto& c : run->second.containers) live = live || (c.running && c.pid > 0);
    if (live) {
      if (!run->second.terminating) {
        run->second.terminating = true;
        long long grace = pod["metadata"].value("deletionGracePeriodSeconds", 30LL);
        run->second.kill_at = Clock::now() + std::chrono::seconds(grace);
        kill_run(run->second, SIGTERM);
      }
    } else {
      if (run != runs_.end()) {
        forget_probes(run->second);
        runs_.erase(run);
      }
      api_.force_remove(*pods_, ns, name);
      pending_dirty_ = true;
    }
    return;
  }
  std::string node = pod.value("/spec/nodeName"_json_pointer, std::string());
  if (node.empty()) {
    if (pod.value("/spec/schedulerName"_json_pointer, std::string("default-scheduler")) == "default-scheduler" && !kube::pod_finished(pod)) {
      if (pending_.insert(key).second) pending_dirty_ = true;
    }
    return;
  }
  pending_.erase(key);
  if (run != runs_.end() || kube::pod_finished(pod)) return;
  Outcome n = api_.get(*nodes_, "", node);
  if (!n.ok()) return;  // bound to a node that does not exist (yet): stays Pending
  if (node_failed(n.object)) {
    api_.mutate(*pods_, ns, name, [&](Json& p) {
      p["status"]["phase"] = "Failed";
      p["status"]["reason"] = "NodeLost";
      p["status"]["message"] = "Node " + node + " which was running pod " + name + " is unresponsive";
      return true;
    });
    return;
  }
  if (still_pulling(pod, n.object)) return;
  start_pod(pod);
}

// The node's kGpuMemoryUsedBytesAnnotation, or 0 when absent or not a whole number of bytes
// below the GPU's memory (logged).
static double memory_used_by_others(const Json& node, const EmulatedGpu& gpu) {
  const std::string text =
      node.value("/metadata/annotations"_json_pointer, Json::object()).value(kGpuMemoryUsedBytesAnnotation, "");
  if (text.empty()) return 0;
  std::int64_t bytes = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
  if (error == std::errc() && end == text.data() + text.size() && bytes >= 0 &&
      static_cast<double>(bytes) < gpu.memory_bytes)
    return static_cast<double>(bytes);
  std::cerr << "flotilla-devcluster: kubelet: node " + node["metadata"].value("name", "") + ": " +
                   kGpuMemoryUsedBytesAnnotation + " '" + text + "' is not a whole number of bytes in [0, " +
                   significant_digits_text(gpu.memory_bytes, 17) + "); ignored\n"
            << std::flush;
  return 0;
}

bool Kubelet::still_pulling(const Json& pod, const Json& node) {
  const std::string uid = pod["metadata"].value("uid", "");
  const std::string text =
      node.value("/metadata/annotations"_json_pointer, Json::object()).value(kImagePullSecondsAnnotation, "");
  char* end = nullptr;
  const double seconds = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (!text.empty() && (end == nullptr || *end != '\0' || !(seconds >= 0 && seconds <= kMaxImagePullSeconds)))
    std::cerr << "flotilla-devcluster: kubelet: node " + node["metadata"].value("name", "") + ": " +
                     kImagePullSecondsAnnotation + " '" + text + "' is not a number of seconds in [0, " +
                     std::to_string(static_cast<int>(kMaxImagePullSeconds)) + "]; ignored\n"
              << std::flush;
  if (!(seconds > 0 && seconds <= kMaxImagePullSeconds) || end == nullptr || *end != '\0') {
    pulling_.erase(uid);
    return false;
  }
  const auto now = Clock::now();
  auto [it, first] = pulling_.try_emplace(
      uid, Pull{pod["metadata"].value("namespace", ""), pod["metadata"].value("name", ""),
                now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))});
  if (now >= it->second.done_at) {
    pulling_.erase(it);
    return false;
  }
  if (first) {
    Json statuses = Json::array();
    for (const auto& c : pod["spec"].value("containers", Json::array()))
      statuses.push_back({{"name", c.value("name", "")},
                          {"image", c.value("image", "")},
                          {"imageID", ""},
                          {"ready", false},
                          {"started", false},
                          {"restartCount", 0},
                          {"state", {{"waiting", {{"reason", "ContainerCreating"}}}}}});
    api_.mutate(*pods_, it->second.ns, it->second.name, [&](Json& p) {
      if (!p["status"].is_object()) p["status"] = Json::object();
      p["status"]["phase"] = "Pending";
      p["status"]["containerStatuses"] = statuses;
      return true;
    });
  }
  return true;
}

std::vector<int> Kubelet::allocate_gpus(const std::string& node, int count) const {
  std::set<int> used;
  for (const auto& [uid, run] : runs_)
    if (run.node == node && !run.finished) used.insert(run.gpus.begin(), run.gpus.end());
  Outcome n = api_.get(*nodes_, "", node);
  int total = n.ok() ? node_gpus(n.object) : 0;
  std::vector<int> out;
  for (int i = 0; i < total && static_cast<int>(out.size()) < count; ++i)
    if (!used.count(i)) out.push_back(i);
  if (static_cast<int>(out.size()) < count) out.clear();
  return out;
}

void Kubelet::start_pod(const Json& pod) {
  Run run;
  run.ns = pod["metadata"].value("namespace", "");
  run.name = pod["metadata"].value("name", "");
  run.uid = pod["metadata"].value("uid", "");
  run.node = pod["spec"].value("nodeName", "");
  run.restart_policy = pod["spec"].value("restartPolicy", "Always");
  run.dir = options_.pods_dir / run.ns / (run.name + "-" + run.uid.substr(0, 8));
  bool lost = pod.value("/status/phase"_json_pointer, std::string()) == "Running";  // devcluster restarted under it
  if (lost && run.restart_policy == "Never") {
    api_.mutate(*pods_, run.ns, run.name, [&](Json& p) {
      p["status"]["phase"] = "Failed";
      p["status"]["reason"] = "ProcessLost";
      p["status"]["message"] = "devcluster restarted while the pod's processes were running";
      return true;
    });
    return;
  }
  int want = gpu_request(pod);
  if (want > 0) {
    run.gpus = allocate_gpus(run.node, want);
    if (run.gpus.empty()) {
      api_.mutate(*pods_, run.ns, run.name, [&](Json& p) {
        p["status"]["phase"] = "Failed";
        p["status"]["reason"] = "OutOfnvidia.com/gpu";
        p["status"]["message"] = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: " +
                                 std::to_string(want);
        return true;
      });
      return;
    }
    std::string list;
    for (int g : run.gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
    api_.mutate(*pods_, run.ns, run.name, [&](Json& p) {
      if (p["metadata"].value("annotations", Json::object()).value(kGpusAnnotation, "") == list) return false;
      p["metadata"]["annotations"][kGpusAnnotation] = list;
      return true;
    }, false);
  }
  std::error_code ec;
  std::filesystem::create_directories(run.dir, ec);
  run.service_account_dir = mount_service_account(pod, run.dir);
  const Json containers = pod["spec"].value("containers", Json::array());
  const Json old_statuses = pod.value("/status/containerStatuses"_json_pointer, Json::array());
  for (const auto& c : containers) {
    Container k;
    k.name = c.value("name", "");
    // Without an image to supply an entrypoint, `args` alone are the command line.
    k.has_command = (c.contains("command") && c["command"].is_array() && !c["command"].empty()) ||
                    (c.contains("args") && c["args"].is_array() && !c["args"].empty());
    for (const auto& s : old_statuses)
      if (s.value("name", "") == k.name) k.restarts = s.value("restartCount", 0) + (lost ? 1 : 0);
    run.containers.push_back(k);
  }
  auto& stored = runs_[run.uid] = std::move(run);
  for (size_t i = 0; i < stored.containers.size(); ++i)
    if (stored.containers[i].has_command) start_container(stored, i, pod);
    else {
      stored.containers[i].running = true;  // a pause container: nothing to run
      stored.containers[i].started_at = now_rfc3339();
    }
  publish_status(stored);
}

bool Kubelet::start_container(Run& run, size_t index, const Json& pod) {
  Container& k = run.containers[index];
  const Json& c = pod["spec"]["containers"][index];
  // Environment, in Kubernetes order: envFrom, then env (later wins), with $(VAR) expansion.
  std::vector<std::pair<std::string, std::string>> env;
  std::string gpus;
  for (int g : run.gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  Outcome node = api_.get(*nodes_, "", run.node);
  std::string gpu_type = node.ok() ? node.object["metadata"].value("labels", Json::object()).value("nvidia.com/gpu.product", "") : "";
  env.emplace_back("POD_NAME", run.name);
  env.emplace_back("POD_NAMESPACE", run.ns);
  env.emplace_back("POD_UID", run.uid);
  env.emplace_back("POD_IP", "127.0.0.1");
  env.emplace_back("NODE_NAME", run.node);
  env.emplace_back("FLOTILLA_VISIBLE_GPUS", gpus);
  env.emplace_back("FLOTILLA_GPU_TYPE", gpu_type);
  if (auto emulated = options_.emulated_gpus.find(gpu_type); emulated != options_.emulated_gpus.end()) {
    EmulatedGpu gpu = emulated->second;
    if (node.ok()) gpu.memory_bytes -= memory_used_by_others(node.object, gpu);
    for (auto& [name, value] : to_env(gpu)) env.emplace_back(name, value);
  }
  env.emplace_back("FLOTILLA_POD_DIR", run.dir.string());
  if (node.ok() && node.object["metadata"].value("annotations", Json::object()).value(kCudaAnnotation, "") == "true")
    env.emplace_back("CUDA_VISIBLE_DEVICES", gpus);
  if (!run.service_account_dir.empty()) {
    // What a real pod has: the API's address in the environment and the ServiceAccount's
    // files in a directory (here named by FLOTILLA_SERVICEACCOUNT_DIR); devcluster's own
    // KUBECONFIG must not make the process the admin instead.
    env.emplace_back("KUBERNETES_SERVICE_HOST", mounts_.api_host);
    env.emplace_back("KUBERNETES_SERVICE_PORT", std::to_string(mounts_.api_port));
    env.emplace_back("KUBERNETES_SERVICE_PORT_HTTPS", std::to_string(mounts_.api_port));
    env.emplace_back(kServiceAccountDirEnv, run.service_account_dir.string());
    env.emplace_back("KUBECONFIG", "");
  }
  auto lookup = [&](const std::string& resource, const std::string& obj_name, const std::string& key, bool secret,
                    std::string* out) {
    const ResourceType* t = builtin_registry_->find("", "v1", resource);
    Outcome o = api_.get(*t, run.ns, obj_name);
    if (!o.ok()) return false;
    const Json data = o.object.value("data", Json::object());
    if (!data.contains(key)) return false;
    *out = secret ? base64_decode(data[key].get<std::string>()) : data[key].get<std::string>();
    return true;
  };
  for (const auto& from : c.value("envFrom", Json::array())) {
    std::string prefix = from.value("prefix", "");
    bool secret = from.contains("secretRef");
    const Json ref = secret ? from["secretRef"] : from.value("configMapRef", Json::object());
    const ResourceType* t = builtin_registry_->find("", "v1", secret ? "secrets" : "configmaps");
    Outcome o = api_.get(*t, run.ns, ref.value("name", ""));
    if (!o.ok()) continue;
    const Json data = o.object.value("data", Json::object());
    for (auto& [key, v] : data.items())
      env.emplace_back(prefix + key, secret ? base64_decode(v.get<std::string>()) : v.get<std::string>());
  }
  for (const auto& e : c.value("env", Json::array())) {
    std::string name = e.value("name", "");
    std::string value;
    if (e.contains("value")) {
      value = expand(e["value"].is_string() ? e["value"].get<std::string>() : e["value"].dump(), env);
    } else if (e.contains("valueFrom")) {
      const Json& vf = e["valueFrom"];
      if (vf.contains("fieldRef")) {
        std::string fp = vf["fieldRef"].value("fieldPath", "");
        if (fp == "metadata.name") value = run.name;
        else if (fp == "metadata.namespace") value = run.ns;
        else if (fp == "metadata.uid") value = run.uid;
        else if (fp == "spec.nodeName") value = run.node;
        else if (fp == "status.podIP" || fp == "status.hostIP") value = "127.0.0.1";
        else if (fp == "spec.serviceAccountName") value = pod["spec"].value("serviceAccountName", "default");
        else if (fp.rfind("metadata.labels['", 0) == 0 || fp.rfind("metadata.annotations['", 0) == 0) {
          bool labels = fp[9] == 'l';
          size_t start = fp.find("['") + 2, end = fp.find("']");
          std::string key = fp.substr(start, end - start);
          value = pod["metadata"].value(labels ? "labels" : "annotations", Json::object()).value(key, "");
        }
      } else if (vf.contains("configMapKeyRef")) {
        lookup("configmaps", vf["configMapKeyRef"].value("name", ""), vf["configMapKeyRef"].value("key", ""), false, &value);
      } else if (vf.contains("secretKeyRef")) {
        lookup("secrets", vf["secretKeyRef"].value("name", ""), vf["secretKeyRef"].value("key", ""), true, &value);
      }
    }
    env.emplace_back(name, value);
  }
  std::vector<std::string> argv;
  for (const auto& a : c.value("command", Json::array())) argv.push_back(expand(a.get<std::string>(), env));
  for (const auto& a : c.value("args", Json::array())) argv.push_back(expand(a.get<std::string>(), env));
  // Environment: devcluster's own, overridden by the pod's (later entries win), then the
  // container marker (it must not be overridable: it is how orphans are found).
  process::SpawnOptions spawn;
  spawn.argv = argv;
  for (const auto& [k, v] : env) spawn.env[k] = v;
  k.marker = marker_entry(run.uid, k.name);
  spawn.env[kContainerMarker] = k.marker.substr(k.marker.find('=') + 1);
  std::string workdir = c.value("workingDir", "");
  if (workdir.empty() || !std::filesystem::is_directory(workdir)) workdir = run.dir.string();
  spawn.working_dir = workdir;
  spawn.stdout_path = run.dir / (k.name + ".log");
  spawn.stderr_path = spawn.stdout_path;
  spawn.stdin_path = "/dev/null";
  // Its own session (so also its own group): everything it starts that does not call setsid()
  // itself stays in the session and goes with the container.
  spawn.isolation = process::Isolation::kSession;
  spawn.parent_death_signal = SIGKILL;
  spawn.exec_failure = process::ExecFailure::kExit;  // exit 127 with the reason in the log
  pid_t pid = -1;
  if (!argv.empty()) {
    // Recorded before the fork, so a crash between the fork and the record below still leaves
    // the marker for the next start to find.
    starting_marker_ = k.marker;
    save_process_records();
    try {
      pid = process::spawn(spawn).release();  // reaped by reap_children() through pid_index_
    } catch (const std::exception& e) {
      std::cerr << "flotilla-devcluster: cannot start container " << k.name << " of pod " << run.ns << "/"
                << run.name << ": " << e.what() << "\n";
    }
    starting_marker_.clear();
  }
  if (pid < 0) {
    save_process_records();
    k.terminated = true;
    k.exit_code = 128;
    k.reason = "StartError";
    return false;
  }
  k.pid = pid;
  k.start_time = process::process_start_time(pid).value_or(0);
  k.running = true;
  k.terminated = false;
  k.waiting_restart = false;
  k.started_at = now_rfc3339();
  pid_index_[pid] = {run.uid, index};
  save_process_records();
  std::string unsupported_readiness, unsupported_liveness;
  auto readiness = parse_probe(c, "readinessProbe", &unsupported_readiness);
  auto liveness = parse_probe(c, "livenessProbe", &unsupported_liveness);
  for (const auto& [what, why] : {std::pair{"readiness", unsupported_readiness}, std::pair{"liveness", unsupported_liveness}})
    if (!why.empty())
      std::cerr << "flotilla-devcluster: pod " + run.ns + "/" + run.name + " container " + k.name + ": the " + what +
                       " probe uses " + why + ", which devcluster does not run; it is ignored\n" << std::flush;
  prober_.add(run.uid + "/" + k.name, readiness, liveness);
  return true;
}

std::filesystem::path Kubelet::mount_service_account(const Json& pod, const std::filesystem::path& pod_dir) {
  if (!mounts_.issue_token) return {};
  const std::string ns = pod["metadata"].value("namespace", "");
  const std::string sa_name = pod["spec"].value("serviceAccountName", "default");
  Outcome sa = api_.get(*builtin_registry_->find("", "v1", "serviceaccounts"), ns, sa_name);
  bool automount = sa.ok() ? sa.object.value("automountServiceAccountToken", true) : true;
  if (pod["spec"].contains("automountServiceAccountToken") && pod["spec"]["automountServiceAccountToken"].is_boolean())
    automount = pod["spec"]["automountServiceAccountToken"].get<bool>();
  if (!automount) return {};
  if (!sa.ok()) {
    std::cerr << "flotilla-devcluster: pod " + ns + "/" + pod["metadata"].value("name", "") + ": service account \"" + sa_name +
                     "\" not found; no token mounted\n" << std::flush;
    return {};
  }
  const std::filesystem::path dir = pod_dir / "serviceaccount";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto write = [&](const char* file, const std::string& text) {
    std::ofstream out(dir / file, std::ios::binary | std::ios::trunc);
    out << text;
    std::filesystem::permissions(dir / file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::replace, ec);
  };
  write("token", mounts_.issue_token(ns, sa_name, sa.object["metadata"].value("uid", "")));
  write("ca.crt", mounts_.ca_pem);
  write("namespace", ns);
  return dir;
}

void Kubelet::forget_probes(const Run& run) {
  for (const auto& c : run.containers) prober_.remove(run.uid + "/" + c.name);
}

void Kubelet::apply_probe_results() {
  for (const auto& key : prober_.take_liveness_failures()) {
    const std::string uid = key.substr(0, key.find('/')), container = key.substr(key.find('/') + 1);
    auto it = runs_.find(uid);
    if (it == runs_.end() || it->second.terminating) continue;
    for (auto& c : it->second.containers)
      if (c.name == container && c.running && c.pid > 0) {
        std::cerr << "flotilla-devcluster: pod " + it->second.ns + "/" + it->second.name + " container " + container +
                         " failed its liveness probe; killing it\n" << std::flush;
        signal_container(c.pid, c.start_time, c.marker, SIGKILL, true);
      }
  }
  if (!prober_.take_changed()) return;
  for (auto& [uid, run] : runs_)
    if (!run.finished && !run.terminating) publish_status(run);
}

void Kubelet::kill_run(Run& run, int sig) {
  for (auto& c : run.containers)
    if (c.running && c.pid > 0) signal_container(c.pid, c.start_time, c.marker, sig, true);
}

void Kubelet::save_process_records() {
  Json records = Json::array();
  for (const auto& [uid, run] : runs_)
    for (const auto& c : run.containers)
      if (c.running && c.pid > 0)
        records.push_back({{"namespace", run.ns}, {"pod", run.name}, {"uid", uid}, {"container", c.name},
                           {"pid", c.pid}, {"startTime", c.start_time}, {"marker", c.marker}});
  if (!starting_marker_.empty()) records.push_back({{"pid", 0}, {"startTime", 0}, {"marker", starting_marker_}});
  std::error_code ec;
  std::filesystem::create_directories(options_.pods_dir, ec);
  const auto path = options_.pods_dir / "processes.json";
  const auto tmp = options_.pods_dir / "processes.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << records.dump(1) << "\n";
    if (!out) return;  // best effort: the in-memory state is what this run acts on
  }
  std::filesystem::rename(tmp, path, ec);
}

void Kubelet::reap_previous_run() {
  const auto path = options_.pods_dir / "processes.json";
  std::ifstream in(path);
  if (!in) return;
  std::stringstream text;
  text << in.rdbuf();
  Json records = Json::parse(text.str(), nullptr, false);
  if (!records.is_array()) {
    std::cerr << "flotilla-devcluster: ignoring unreadable " << path.string() << "\n";
    return;
  }
  for (const auto& r : records) {
    pid_t pid = 0;
    unsigned long long start = 0;
    std::string marker, who;
    try {  // a hand-edited file must not stop devcluster from starting
      pid = r.at("pid").get<pid_t>();
      start = r.at("startTime").get<unsigned long long>();
      marker = r.at("marker").get<std::string>();
      who = r.contains("pod") ? "pod " + r.value("namespace", "") + "/" + r.value("pod", "") + " container " +
                                    r.value("container", "")
                              : marker;
    } catch (const Json::exception&) {
      std::cerr << "flotilla-devcluster: ignoring a malformed entry of " << path.string() << ": " << r.dump() << "\n";
      continue;
    }
    if (pid <= 1 && marker.empty()) continue;
    const int killed = signal_container(pid, start, marker, SIGKILL, false);
    if (killed > 0)
      std::cerr << "flotilla-devcluster: killed " << killed << " process(es) left by a previous run of " << who << "\n";
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

void Kubelet::publish_status(Run& run) {
  bool any_running = false, all_done = true, all_zero = true, all_ready = true;
  Json statuses = Json::array();
  for (const auto& c : run.containers) {
    Json st = {{"name", c.name}, {"restartCount", c.restarts}, {"image", ""}, {"imageID", ""},
               {"containerID", "devcluster://" + std::to_string(c.pid)}};
    if (c.running) {
      any_running = true;
      all_done = false;
      const bool probed_ready = prober_.ready(run.uid + "/" + c.name);
      all_ready = all_ready && probed_ready;
      st["ready"] = probed_ready;
      st["started"] = true;
      st["state"] = {{"running", {{"startedAt", c.started_at}}}};
    } else {
      all_ready = false;
      Json term = {{"exitCode", c.exit_code}, {"reason", c.reason}, {"startedAt", c.started_at}, {"finishedAt", c.finished_at},
                   {"containerID", "devcluster://" + std::to_string(c.pid)}};
      st["ready"] = false;
      st["started"] = false;
      if (c.waiting_restart) {
        all_done = false;
        st["state"] = {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off restarting failed container " + c.name}}}};
        st["lastState"] = {{"terminated", term}};
      } else {
        st["state"] = {{"terminated", term}};
        if (c.exit_code != 0) all_zero = false;
      }
    }
    statuses.push_back(st);
  }
  std::string phase = all_done ? (all_zero ? "Succeeded" : "Failed") : "Running";
  (void)any_running;
  if (all_done) run.finished = true;
  std::string now = now_rfc3339();
  api_.mutate(*pods_, run.ns, run.name, [&](Json& p) {
    if (p["metadata"].value("uid", "") != run.uid) return false;
    Json& s = p["status"];
    s["phase"] = phase;
    s["containerStatuses"] = statuses;
    s["hostIP"] = "127.0.0.1";
    s["podIP"] = "127.0.0.1";
    s["podIPs"] = Json::array({{{"ip", "127.0.0.1"}}});
    if (!s.contains("startTime")) s["startTime"] = now;
    s.erase("reason");
    s.erase("message");
    std::string ready = all_ready && !all_done ? "True" : "False";
    Json conds = Json::array();
    for (const auto& [type, value] : std::vector<std::pair<std::string, std::string>>{
             {"PodScheduled", "True"}, {"Initialized", "True"}, {"ContainersReady", ready}, {"Ready", ready}}) {
      std::string since = now;
      for (const auto& old : s.value("conditions", Json::array()))
        if (old.value("type", "") == type && old.value("status", "") == value) since = old.value("lastTransitionTime", now);
      conds.push_back({{"type", type}, {"status", value}, {"lastTransitionTime", since}});
    }
    s["conditions"] = conds;
    return true;
  });
}

void Kubelet::reap_children() {
  std::vector<pid_t> exited;
  for (const auto& [pid, where] : pid_index_) {
    if (!process::has_exited(pid)) continue;
    auto run_it = runs_.find(where.first);
    // The session may still hold children, and some may have left it: they go with the leader,
    // while it is an unreaped zombie (so its ids cannot have been reused).
    if (run_it != runs_.end()) {
      const Container& c = run_it->second.containers[where.second];
      signal_container(pid, c.start_time, c.marker, SIGKILL, true);
    }
    auto status = process::try_reap(pid);
    if (!status) continue;
    exited.push_back(pid);
    if (run_it == runs_.end()) continue;
    Run& run = run_it->second;
    Container& c = run.containers[where.second];
    prober_.remove(run.uid + "/" + c.name);
    c.running = false;
    c.terminated = true;
    c.exit_code = status->shell_code();
    c.reason = c.exit_code == 0 ? "Completed" : "Error";
    c.finished_at = now_rfc3339();
    if (run.terminating) {
      bool live = false;
      for (const auto& k : run.containers) live = live || (k.running && k.pid > 0);  // pause containers have no process
      if (!live) {
        std::string ns = run.ns, name = run.name;
        forget_probes(run);
        runs_.erase(run_it);
        api_.force_remove(*pods_, ns, name);
        pending_dirty_ = true;
      }
      continue;
    }
    if (run.finished) continue;
    bool restart = run.restart_policy == "Always" || (run.restart_policy == "OnFailure" && c.exit_code != 0);
    if (restart) {
      c.waiting_restart = true;
      // Short exponential back-off (devcluster is for tests): 100 ms doubling to 5 s.
      auto delay = std::chrono::milliseconds(std::min(5000, 100 << std::min(c.restarts, 6)));
      c.restart_at = Clock::now() + delay;
    }
    publish_status(run);
    if (run.finished) pending_dirty_ = true;
  }
  for (pid_t p : exited) pid_index_.erase(p);
  if (!exited.empty()) save_process_records();
}

void Kubelet::timers() {
  auto now = Clock::now();
  std::vector<Pull> pulled;
  for (const auto& [uid, pull] : pulling_)
    if (now >= pull.done_at) pulled.push_back(pull);
  for (const Pull& pull : pulled) handle_pod_guarded(pull.ns, pull.name);
  // Whatever is still due was not started by handle_pod() (the pod is gone, Failed with its node,
  // or bound elsewhere): forget it, or it would be handled again every tick for good.
  for (auto it = pulling_.begin(); it != pulling_.end();) it = now >= it->second.done_at ? pulling_.erase(it) : std::next(it);
  for (auto& [uid, run] : runs_) {
    if (run.terminating && now >= run.kill_at) {
      kill_run(run, SIGKILL);
      run.kill_at = now + std::chrono::hours(1);
    }
    if (run.terminating || run.finished) continue;
    for (size_t i = 0; i < run.containers.size(); ++i) {
      Container& c = run.containers[i];
      if (!c.waiting_restart || now < c.restart_at) continue;
      Outcome pod = api_.get(*pods_, run.ns, run.name);
      if (!pod.ok()) continue;
      ++c.restarts;
      start_container(run, i, pod.object);
      publish_status(run);
    }
  }
}

void Kubelet::fail_pods_on_node(const std::string& node, const std::string& reason, const std::string& message, bool remove) {
  std::vector<std::pair<std::string, std::string>> victims;
  {
    auto lock = api_.store().lock();
    for (const auto& [key, obj] : api_.store().list_locked("/pods", ""))
      if ((*obj)["spec"].value("nodeName", "") == node) victims.emplace_back((*obj)["metadata"]["namespace"], (*obj)["metadata"]["name"]);
  }
  for (const auto& [ns, name] : victims) {
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
      if (it->second.ns != ns || it->second.name != name) continue;
      kill_run(it->second, SIGKILL);
      for (auto& c : it->second.containers) {
        if (c.running) {
          c.running = false;
          c.terminated = true;
          c.exit_code = 137;
          c.reason = "Error";
          c.finished_at = now_rfc3339();
        }
        c.waiting_restart = false;
      }
      it->second.finished = true;
      break;
    }
    if (remove) {
      api_.remove(*pods_, ns, name, DeleteOptions{0});
      api_.force_remove(*pods_, ns, name);
      continue;
    }
    api_.mutate(*pods_, ns, name, [&](Json& p) {
      if (kube::pod_finished(p)) return false;
      p["status"]["phase"] = "Failed";
      p["status"]["reason"] = reason;
      p["status"]["message"] = message;
      for (auto& cs : p["status"].value("containerStatuses", Json::array())) (void)cs;
      if (p["status"].contains("containerStatuses"))
        for (auto& cs : p["status"]["containerStatuses"]) {
          if (cs.contains("state") && cs["state"].contains("running")) {
            Json started = cs["state"]["running"].value("startedAt", "");
            cs["state"] = {{"terminated", {{"exitCode", 137}, {"reason", "Error"}, {"startedAt", started}, {"finishedAt", now_rfc3339()}}}};
          }
          cs["ready"] = false;
        }
      if (p["status"].contains("conditions"))
        for (auto& cond : p["status"]["conditions"])
          if (cond.value("type", "") == "Ready" || cond.value("type", "") == "ContainersReady") cond["status"] = "False";
      return true;
    });
  }
}

void Kubelet::handle_node(const std::string& name) {
  Outcome n = api_.get(*nodes_, "", name);
  if (!n.ok()) {
    fail_pods_on_node(name, "NodeLost", "node " + name + " was removed", true);
    return;
  }
  bool failed = node_failed(n.object);
  bool ready = node_ready(n.object);
  bool has_ready_condition = false;
  for (const auto& c : n.object.value("/status/conditions"_json_pointer, Json::array()))
    has_ready_condition = has_ready_condition || c.value("type", "") == "Ready";
  if (!has_ready_condition && !failed) {
    // A Node created through the API (kubectl create -f node.yaml): adopt it as a virtual node,
    // with the GPUs its status or its nvidia.com/gpu.count label declares.
    api_.mutate(*nodes_, "", name, [&](Json& node) {
      NodeSpec spec;
      spec.name = name;
      const Json labels = node["metadata"].value("labels", Json::object());
      std::string count = node.value("/status/capacity"_json_pointer, Json::object())
                              .value("nvidia.com/gpu", labels.value("nvidia.com/gpu.count", "0"));
      try {
        spec.gpu_count = std::stoi(count);
      } catch (...) {
      }
      spec.gpu_type = labels.value("nvidia.com/gpu.product", "");
      spec.zone = labels.value("topology.kubernetes.io/zone", "");
      Json fresh = node_object(spec);
      for (auto& [k, v] : fresh["metadata"]["labels"].items())
        if (!labels.contains(k)) node["metadata"]["labels"][k] = v;
      Json status = node.value("status", Json::object());
      for (auto& [k, v] : fresh["status"].items())
        if (!status.contains(k) || k == "conditions") status[k] = v;
      node["status"] = status;
      return true;
    });
    return;
  }
  if (failed) {
    if (ready) {
      api_.mutate(*nodes_, "", name, [&](Json& node) {
        std::string now = now_rfc3339();
        for (auto& c : node["status"]["conditions"])
          if (c.value("type", "") == "Ready") {
            c["status"] = "False";
            c["reason"] = "NodeFailed";
            c["message"] = "devcluster: node failed by request";
            c["lastTransitionTime"] = now;
          }
        Json taints = node["spec"].value("taints", Json::array());
        taints.push_back({{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}, {"timeAdded", now}});
        node["spec"]["taints"] = taints;
        return true;
      });
    }
    fail_pods_on_node(name, "NodeLost", "Node " + name + " which was running the pod is unresponsive", false);
  } else if (!ready) {
    bool we_failed_it = false;
    for (const auto& c : n.object.value("/status/conditions"_json_pointer, Json::array()))
      we_failed_it = we_failed_it || (c.value("type", "") == "Ready" && c.value("reason", "") == "NodeFailed");
    if (we_failed_it)
      api_.mutate(*nodes_, "", name, [&](Json& node) {
        for (auto& c : node["status"]["conditions"])
          if (c.value("type", "") == "Ready") {
            c["status"] = "True";
            c["reason"] = "KubeletReady";
            c["message"] = "devcluster virtual kubelet is posting ready status";
            c["lastTransitionTime"] = now_rfc3339();
          }
        Json taints = Json::array();
        for (const auto& t : node["spec"].value("taints", Json::array()))
          if (t.value("key", "") != "node.kubernetes.io/unreachable") taints.push_back(t);
        if (taints.empty()) node["spec"].erase("taints");
        else node["spec"]["taints"] = taints;
        return true;
      });
  }
}

void Kubelet::schedule_pending() {
  pending_dirty_ = false;
  last_schedule_ = Clock::now();
  std::vector<Json> nodes;
  std::map<std::string, int> used;
  std::vector<Json> pods;
  {
    auto lock = api_.store().lock();
    for (const auto& [key, obj] : api_.store().list_locked("/nodes", "")) nodes.push_back(*obj);
    for (const auto& [key, obj] : api_.store().list_locked("/pods", "")) {
      std::string node = (*obj)["spec"].value("nodeName", "");
      if (!node.empty() && !kube::pod_finished(*obj)) used[node] += gpu_request(*obj);
    }
    for (const auto& key : pending_) {
      auto slash = key.find('/');
      if (ObjectPtr p = api_.store().get_locked("/pods", key.substr(0, slash), key.substr(slash + 1))) pods.push_back(*p);
    }
  }
  std::sort(pods.begin(), pods.end(), [](const Json& a, const Json& b) {
    return a["metadata"].value("creationTimestamp", "") < b["metadata"].value("creationTimestamp", "");
  });
  for (const auto& pod : pods) {
    std::string ns = pod["metadata"].value("namespace", ""), name = pod["metadata"].value("name", "");
    int want = gpu_request(pod);
    const Json* best = nullptr;
    int best_free = 0;
    std::map<std::string, int> reasons;
    for (const auto& node : nodes) {
      std::string why = node_mismatch(pod, node);
      std::string node_name = node["metadata"].value("name", "");
      int free = node_gpus(node) - used[node_name];
      if (why.empty() && free < want) why = "Insufficient nvidia.com/gpu";
      if (!why.empty()) {
        ++reasons[why];
        continue;
      }
      // Best fit: the feasible node with the fewest GPUs left over; ties by name.
      if (!best || free - want < best_free) {
        best = &node;
        best_free = free - want;
      }
    }
    if (best) {
      std::string node_name = (*best)["metadata"].value("name", "");
      Outcome o = api_.bind_pod(ns, name, {{"target", {{"kind", "Node"}, {"name", node_name}}}});
      if (o.ok()) {
        used[node_name] += want;
        pending_.erase(ns + "/" + name);
      }
      continue;
    }
    std::string message = "0/" + std::to_string(nodes.size()) + " nodes are available";
    for (const auto& [why, count] : reasons) message += (message.back() == 'e' ? ": " : ", ") + std::to_string(count) + " " + why;
    message += ".";
    api_.mutate(*pods_, ns, name, [&](Json& p) {
      Json conds = p["status"].value("conditions", Json::array());
      for (const auto& c : conds)
        if (c.value("type", "") == "PodScheduled" && c.value("message", "") == message) return false;
      {
    Json kept = Json::array();
    for (const auto& c : conds)
      if (c.value("type", "") != "PodScheduled") kept.push_back(c);
    conds = kept;
  }
      conds.push_back({{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}, {"message", message},
                       {"lastTransitionTime", now_rfc3339()}});
      p["status"]["conditions"] = conds;
      return true;
    });
  }
}

void Kubelet::gc_pass() {
  gc_dirty_ = false;
  last_gc_ = Clock::now();
  auto reg = api_.registry();
  struct Victim {
    const ResourceType* type;
    std::string ns, name;
  };
  std::vector<Victim> victims;
  std::vector<std::string> finished_namespaces;
  {
    auto lock = api_.store().lock();
    auto all = api_.store().all_locked();
    std::set<std::string> uids;
    std::set<std::string> terminating_ns;
    for (const auto& [key, obj] : all) {
      uids.insert((*obj)["metadata"].value("uid", ""));
      if (key.rfind("/namespaces|", 0) == 0 && (*obj)["metadata"].contains("deletionTimestamp"))
        terminating_ns.insert((*obj)["metadata"].value("name", ""));
    }
    std::set<std::string> nonempty_ns;
    for (const auto& [key, obj] : all) {
      const Json& meta = (*obj)["metadata"];
      std::string resource = key.substr(0, key.find('|'));
      const ResourceType* type = type_for_storage(*reg, resource);
      if (!type) continue;
      std::string ns = meta.value("namespace", "");
      if (!ns.empty() && terminating_ns.count(ns)) {
        nonempty_ns.insert(ns);
        if (!meta.contains("deletionTimestamp")) victims.push_back({type, ns, meta.value("name", "")});
        continue;
      }
      if (!meta.contains("ownerReferences") || meta.contains("deletionTimestamp")) continue;
      bool any_alive = false;
      for (const auto& ref : meta["ownerReferences"]) any_alive = any_alive || uids.count(ref.value("uid", ""));
      if (!any_alive && !meta["ownerReferences"].empty()) victims.push_back({type, ns, meta.value("name", "")});
    }
    for (const auto& ns : terminating_ns)
      if (!nonempty_ns.count(ns)) finished_namespaces.push_back(ns);
  }
  for (const auto& v : victims) {
    DeleteOptions opts;
    opts.propagation = "Background";
    api_.remove(*v.type, v.ns, v.name, opts);
  }
  const ResourceType* namespaces = reg->find("", "v1", "namespaces");
  for (const auto& ns : finished_namespaces) api_.force_remove(*namespaces, "", ns);
  // Deleting dependents may orphan further dependents: look again soon.
  if (!victims.empty() || !finished_namespaces.empty()) gc_dirty_ = true;
}

Outcome Kubelet::admin(const std::string& method, const std::vector<std::string>& seg, const Json& body) {
  auto not_found_path = Outcome::fail({404, "NotFound", "unknown admin endpoint", "", "", "", {}});
  if (seg.size() == 1 && seg[0] == "compact" && method == "POST") {
    api_.store().compact_window();
    Outcome o;
    auto lock = api_.store().lock();
    o.object = {{"compactedAt", std::to_string(api_.store().rv_locked())}};
    return o;
  }
  if (seg.size() == 1 && seg[0] == "watch-window" && method == "POST") {
    if (!body.contains("events") || !body["events"].is_number_integer() || body["events"].get<long long>() < 1)
      return Outcome::fail(bad_request("body must be {\"events\": N} with N >= 1"));
    api_.store().set_window_events(body["events"].get<size_t>());
    Outcome o;
    o.object = {{"events", body["events"]}};
    return o;
  }
  if (seg.empty() || seg[0] != "nodes") return not_found_path;
  if (seg.size() == 1 && method == "POST") {
    NodeSpec spec;
    std::string error;
    if (!node_spec_from_json(body, &spec, &error)) return Outcome::fail(bad_request(error));
    return api_.create(*nodes_, "", node_object(spec), {});
  }
  if (seg.size() == 2 && method == "DELETE") return api_.remove(*nodes_, "", seg[1], {});
  if (seg.size() != 3 || method != "POST") return not_found_path;
  const std::string& name = seg[1];
  const std::string& action = seg[2];
  std::function<bool(Json&)> edit;
  if (action == "fail") {
    edit = [](Json& n) {
      n["metadata"]["annotations"][kFailedAnnotation] = "true";
      return true;
    };
  } else if (action == "recover") {
    edit = [](Json& n) {
      if (!n["metadata"].contains("annotations")) return false;
      n["metadata"]["annotations"].erase(kFailedAnnotation);
      return true;
    };
  } else if (action == "cordon" || action == "uncordon") {
    bool on = action == "cordon";
    edit = [on](Json& n) {
      if (on) n["spec"]["unschedulable"] = true;
      else n["spec"].erase("unschedulable");
      return true;
    };
  } else {
    return not_found_path;
  }
  return api_.mutate(*nodes_, "", name, edit, false);
}

}  // namespace flotilla::devcluster
