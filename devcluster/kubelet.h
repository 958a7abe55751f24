// The virtual kubelet, scheduler and controllers of devcluster: it binds pending pods to
// virtual GPU nodes, runs each container's command as a local process group, reflects exits in
// pod status per restartPolicy, deletes pods gracefully (SIGTERM, then SIGKILL after the grace
// period), fails and removes nodes, garbage-collects dependents of deleted owners, and
// finalizes terminating namespaces.
//
// Guarantees: every container runs in its own session (and process group), started through
//   flotilla::process; stopping a container signals its whole process tree: the session and
//   group, the leader's live descendants, and every process that carries the container's
//   environment marker (FLOTILLA_DEVCLUSTER_CONTAINER=<pod uid>/<container>), which finds
//   descendants that called setsid() and were reparented. That happens on pod deletion
//   (SIGTERM, then SIGKILL after the grace period), node failure and removal, container exit
//   (leftovers get SIGKILL) and stop(), which terminates everything it started (SIGTERM, then
//   SIGKILL after 2 s) before returning. Each running container (leader pid + its start time,
//   /proc stat field 22, + marker) is recorded in <pods_dir>/processes.json; start() kills
//   whatever a previous run recorded that is still alive (a devcluster that was SIGKILLed)
//   before it starts any pod. GPUs on a node are handed out as distinct indices, never
//   oversubscribed.
//   Processes get the pod's env (value, fieldRef, configMapKeyRef, secretKeyRef, envFrom),
//   POD_NAME, POD_NAMESPACE, POD_UID, POD_IP, NODE_NAME, FLOTILLA_VISIBLE_GPUS,
//   FLOTILLA_GPU_TYPE, FLOTILLA_POD_DIR (also the working dir), and CUDA_VISIBLE_DEVICES when
//   the node asks for it; stdout+stderr go to <pod dir>/<container>.log. A node annotated with
//   kImagePullSecondsAnnotation holds each pod bound to it Pending (ContainerCreating) that long
//   before starting it, as a slow image pull would. Unless
//   automountServiceAccountToken is false, the pod's ServiceAccount token, the cluster CA and
//   the namespace are written to <pod dir>/serviceaccount/ (token 0600) and the processes get
//   KUBERNETES_SERVICE_HOST/PORT and FLOTILLA_SERVICEACCOUNT_DIR (and KUBECONFIG emptied), so
//   kube::in_cluster_config() works inside them. Readiness and liveness probes (prober.h)
//   decide the Ready condition and restart containers.
// Assumes: containers have `command` (+`args`; `args` alone are run as the command line, there
//   being no image entrypoint); a container with neither runs nothing and is
//   reported Running (like a pause container). Images are ignored.
// Caveats: if devcluster itself is SIGKILLed, direct children die (PDEATHSIG) and their own
//   children survive until the next start() of the same data dir reaps them. A descendant that
//   both leaves the session and clears its environment is found only while its ancestors
//   live (through the process tree). A pid reused by an unrelated process is not killed (its
//   start time differs), but an unrelated process that copies the marker would be. Init
//   containers, exec/grpc/startup probes, volumes and resource limits other than
//   nvidia.com/gpu are not implemented.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

#include "common/emulated_gpu.h"
#include "devcluster/api.h"
#include "devcluster/prober.h"

namespace flotilla::devcluster {

struct KubeletOptions {
  std::filesystem::path pods_dir;
  std::chrono::milliseconds tick{50};
  std::chrono::milliseconds shutdown_grace{2000};
  // Emulated GPU types by name (the node's nvidia.com/gpu.product): a pod on such a node gets
  // the type's speed and memory in its environment (common/emulated_gpu.h).
  std::map<std::string, EmulatedGpu> emulated_gpus;
};

// What a pod's processes need to reach the API as their ServiceAccount (set before start()).
struct ServiceAccountMounts {
  std::string api_host;  // KUBERNETES_SERVICE_HOST
  int api_port = 0;      // KUBERNETES_SERVICE_PORT
  std::string ca_pem;    // ca.crt
  // A token for the ServiceAccount (namespace, name, uid).
  std::function<std::string(const std::string&, const std::string&, const std::string&)> issue_token;
};

// The environment variable naming the directory that holds a pod's token, ca.crt and
// namespace (kube::in_cluster_config() reads it; a real pod has them at
// /var/run/secrets/kubernetes.io/serviceaccount, which local processes cannot share).
inline constexpr char kServiceAccountDirEnv[] = "FLOTILLA_SERVICEACCOUNT_DIR";

// A node annotation (seconds, e.g. "8"): every pod bound to that node stays Pending, its
// containers waiting with reason ContainerCreating, that long before they start, as on a node
// pulling a large image (`kubectl annotate node n1 devcluster.flotilla.io/image-pull-seconds=8`).
inline constexpr char kImagePullSecondsAnnotation[] = "devcluster.flotilla.io/image-pull-seconds";
inline constexpr double kMaxImagePullSeconds = 3600;  // a value outside [0, 1 h] is ignored (logged)

// A node annotation (bytes, e.g. "2000000"): memory something else already holds on each of the
// node's emulated GPUs (another tenant's process, a stray CUDA context), so its pods' workers get
// the type's memory less this (`kubectl annotate node n1
// devcluster.flotilla.io/gpu-memory-used-bytes=2000000`). Only emulated types; a value that is not
// a whole number in [0, the type's memory) is ignored (logged). Read when a container starts.
inline constexpr char kGpuMemoryUsedBytesAnnotation[] = "devcluster.flotilla.io/gpu-memory-used-bytes";

class Kubelet {
 public:
  Kubelet(Api& api, KubeletOptions options);
  ~Kubelet();
  void start();
  void stop();
  void set_service_account_mounts(ServiceAccountMounts mounts) { mounts_ = std::move(mounts); }

  // Admin operations: POST nodes (body: node spec), POST nodes/NAME/{fail,recover,cordon,
  // uncordon}, DELETE nodes/NAME, POST compact, POST watch-window (body {"events": N}).
  Outcome admin(const std::string& method, const std::vector<std::string>& segments, const Json& body);
  std::string log_path(const std::string& ns, const std::string& pod, const std::string& container) const;

 private:
  struct Container {
    std::string name;
    bool has_command = false;
    pid_t pid = -1;  // also the session and process group id
    unsigned long long start_time = 0;  // of pid, clock ticks since boot (/proc stat field 22)
    std::string marker;                 // "FLOTILLA_DEVCLUSTER_CONTAINER=<uid>/<name>"
    bool running = false;
    bool terminated = false;
    int exit_code = 0;
    std::string reason;
    int restarts = 0;
    std::string started_at;
    std::string finished_at;
    bool waiting_restart = false;
    std::chrono::steady_clock::time_point restart_at;
  };
  struct Run {
    std::string ns, name, uid, node;
    std::filesystem::path dir;
    std::vector<int> gpus;
    std::vector<Container> containers;
    std::string restart_policy;
    bool terminating = false;
    std::chrono::steady_clock::time_point kill_at;
    bool finished = false;  // terminal phase reported
    std::filesystem::path service_account_dir;  // "" when no token is mounted
  };

  void loop();
  void full_resync();
  void handle_pod(const std::string& ns, const std::string& name);
  // handle_pod(), but a pod it cannot read (an exception) is marked Failed, never fatal.
  void handle_pod_guarded(const std::string& ns, const std::string& name);
  void handle_node(const std::string& name);
  void schedule_pending();
  void reap_children();
  void timers();
  void gc_pass();
  // True while the pod's node still "pulls its image" (kImagePullSecondsAnnotation); the first
  // call publishes its containers as waiting, ContainerCreating. timers() handles it when due.
  bool still_pulling(const Json& pod, const Json& node);
  void start_pod(const Json& pod);
  bool start_container(Run& run, size_t index, const Json& pod);
  void publish_status(Run& run);
  void kill_run(Run& run, int sig);
  // <pods_dir>/processes.json: the running containers, rewritten when one starts or exits.
  void save_process_records();
  // Kills what a previous run recorded there and is still alive; called by start().
  void reap_previous_run();
  // Writes token, ca.crt and namespace for the pod's ServiceAccount into <pod dir>/serviceaccount
  // unless automountServiceAccountToken is false (pod, else ServiceAccount); "" when not mounted.
  std::filesystem::path mount_service_account(const Json& pod, const std::filesystem::path& pod_dir);
  void apply_probe_results();
  void forget_probes(const Run& run);
  void fail_pods_on_node(const std::string& node, const std::string& reason, const std::string& message, bool remove);
  std::vector<int> allocate_gpus(const std::string& node, int count) const;

  Api& api_;
  KubeletOptions options_;
  ServiceAccountMounts mounts_;
  Prober prober_;
  // The registry is replaced whenever CRDs change; holding the first one keeps pods_ and nodes_
  // (built-ins, never changed by a rebuild) alive.
  std::shared_ptr<const Registry> builtin_registry_;
  const ResourceType* pods_ = nullptr;
  const ResourceType* nodes_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;  // guards runs_, pending_ and pulling_ against admin calls
  std::map<std::string, Run> runs_;  // by pod uid
  std::map<pid_t, std::pair<std::string, size_t>> pid_index_;
  std::set<std::string> pending_;  // "ns/name" waiting for a node
  // Bound pods whose node emulates a slow image pull (kImagePullSecondsAnnotation),
  // by uid: when their containers may start. Until then the pod is Pending, ContainerCreating.
  struct Pull {
    std::string ns, name;
    std::chrono::steady_clock::time_point done_at;
  };
  std::map<std::string, Pull> pulling_;  // by pod uid (a re-created pod pulls again)
  std::string starting_marker_;    // the container being spawned, recorded before its fork
  bool pending_dirty_ = true;
  bool gc_dirty_ = true;
  uint64_t cursor_ = 0;
  std::chrono::steady_clock::time_point last_schedule_, last_gc_;
};

}  // namespace flotilla::devcluster
