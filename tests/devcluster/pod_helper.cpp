// A program the devcluster tests run as a pod's container (pods are local processes).
//
//   devcluster_pod_helper in-cluster          reads the in-cluster config (kube::default_config(),
//                                             as the operator does), GETs its own pod, then
//                                             tries to list pods in kube-system; prints one line
//                                             per step ("config ...", "own-pod ...", "list ...").
//   devcluster_pod_helper serve PORT          answers HTTP GET with 200 while the file `ready`
//                                             exists in the working directory, else 503 (a
//                                             readiness probe target); SO_REUSEPORT, so that
//                                             replicas sharing 127.0.0.1 can all listen.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/resource.h"

namespace {

int in_cluster() {
  auto cfg = flotilla::kube::default_config();
  if (!cfg) {
    std::cout << "config-error " << cfg.error().describe() << std::endl;
    return 2;
  }
  std::cout << "config server=" << cfg->server << " namespace=" << cfg->namespace_name << std::endl;
  auto client = flotilla::kube::Client::create(*cfg);
  if (!client) {
    std::cout << "client-error " << client.error().describe() << std::endl;
    return 2;
  }
  const char* pod_name = std::getenv("POD_NAME");
  auto own = (*client)->get(flotilla::kube::resources::pods, cfg->namespace_name, pod_name ? pod_name : "");
  if (own) std::cout << "own-pod ok uid=" << (*own)["metadata"].value("uid", "") << std::endl;
  else std::cout << "own-pod error " << own.error().http_status << " " << own.error().message << std::endl;
  auto list = (*client)->list(flotilla::kube::resources::pods, "kube-system");
  if (list) std::cout << "list ok" << std::endl;
  else std::cout << "list error " << list.error().http_status << " " << list.error().message << std::endl;
  return 0;
}

int serve(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Pods on devcluster share 127.0.0.1: replicas of one Deployment listen on the same port.
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    std::cout << "cannot listen on " << port << std::endl;
    return 1;
  }
  std::cout << "serving on " << port << std::endl;
  for (;;) {
    int c = ::accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    char buf[4096];
    (void)!::read(c, buf, sizeof buf);
    const bool ready = std::filesystem::exists("ready");
    std::string body = ready ? "ok" : "not ready";
    std::string resp = std::string("HTTP/1.1 ") + (ready ? "200 OK" : "503 Service Unavailable") +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    (void)!::write(c, resp.data(), resp.size());
    ::close(c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "in-cluster") return in_cluster();
  if (mode == "serve" && argc > 2) return serve(std::atoi(argv[2]));
  std::cerr << "usage: devcluster_pod_helper in-cluster | serve PORT\n";
  return 64;
}
