// devcluster assembled: PKI and token in the data dir, the store, the API, the virtual
// kubelet, the HTTPS server, and the kubeconfig it writes for itself.
//
// Guarantees: start() either serves (and has written the kubeconfig) or returns false with one
//   line saying what is wrong; the CA, server certificate and bearer token are generated on
//   first start and reused afterwards (so kubeconfigs stay valid across restarts); stop() stops
//   serving, terminates every pod process, and syncs the store.
// Assumes: one devcluster per data dir.
// Caveats: the kubeconfig embeds a cluster-admin bearer token; the data dir is 0700.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "common/emulated_gpu.h"

namespace flotilla::devcluster {

// Larger request bodies get 413 RequestEntityTooLarge (kube-apiserver's default limit).
inline constexpr size_t kMaxRequestBodyBytes = 3u << 20;

struct DevclusterOptions {
  std::string listen = "127.0.0.1:0";  // host:port; port 0 picks a free one
  std::filesystem::path nodes_file;    // optional
  std::filesystem::path data_dir;
  std::filesystem::path kubeconfig_out;  // optional
  size_t watch_window_events = 20000;
  size_t watch_window_bytes = size_t{64} << 20;  // memory of the retained events (store.h)
  int bookmark_interval_ms = 1000;
  // GPU types the virtual nodes emulate (KubeletOptions::emulated_gpus), by name.
  std::map<std::string, EmulatedGpu> emulated_gpus;
};

class Devcluster {
 public:
  Devcluster();
  ~Devcluster();
  bool start(const DevclusterOptions& options, std::string* error);
  void stop();
  int port() const;
  std::string server_url() const;
  std::string token() const;
  std::string ca_pem() const;
  std::string kubeconfig_yaml() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::devcluster
