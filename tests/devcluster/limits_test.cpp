// devcluster at its limits, as a real process: out of file descriptors (the acceptor must back
// off instead of spinning, say what to do, and serve again once descriptors come back), and
// request bodies over kube-apiserver's 3 MiB limit (413 with a Status, never buffered).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <vector>

#include "devcluster_process.h"
#include "kube/net/connection.h"

using namespace devcluster_test;

namespace {

// utime + stime of a process in seconds, from /proc/<pid>/stat (fields 14 and 15).
double cpu_seconds(pid_t pid) {
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  // The command name (field 2) may hold spaces; fields are counted after its closing ')'.
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// A plain TCP connection to 127.0.0.1:port that sends nothing (the server's TLS handshake waits).
int idle_connection(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

int port_of(const std::string& server_url) { return std::stoi(server_url.substr(server_url.rfind(':') + 1)); }

}  // namespace

TEST(DevclusterLimits, OutOfFileDescriptorsBacksOffSaysWhyAndServesAgain) {
  DevclusterProcess dc("fds");
  dc.set_nofile_limit(40);
  ASSERT_TRUE(dc.start()) << dc.log();
  auto [code, body] = dc.call("GET", "/api/v1/namespaces");
  ASSERT_EQ(code, 200) << body.dump();
  std::string kc = read_text(dc.kubeconfig());
  auto s = kc.find("server: ") + 8;
  int port = port_of(kc.substr(s, kc.find('\n', s) - s));

  // More connections than the server has descriptors: the kernel completes them all (backlog
  // 512), the server accepts until EMFILE, and the rest wait in the backlog.
  std::vector<int> conns;
  for (int i = 0; i < 80; ++i) {
    int fd = idle_connection(port);
    ASSERT_GE(fd, 0) << "connect " << i << " failed: " << std::strerror(errno);
    conns.push_back(fd);
  }
  EXPECT_TRUE(eventually([&] { return dc.log().find("cannot accept connections") != std::string::npos; }, 5s))
      << dc.log();
  std::string log = dc.log();
  EXPECT_NE(log.find("EMFILE"), std::string::npos) << log;
  EXPECT_NE(log.find("ulimit -n"), std::string::npos) << log;
  EXPECT_NE(log.find("limit 40"), std::string::npos) << log;

  // While accept keeps failing, the server must idle: a spinning acceptor burns ~1 CPU-second
  // per second (less on a loaded machine, but far above this bound).
  std::this_thread::sleep_for(300ms);  // past the first back-off steps
  double before = cpu_seconds(dc.pid());
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1s);
  double cpu = cpu_seconds(dc.pid()) - before;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "devcluster CPU while out of descriptors: " << cpu << " s over " << wall << " s\n";
  EXPECT_LT(cpu, 0.1 * wall) << "the acceptor spins while accept fails";
  // One line per episode, not one per failed accept.
  size_t lines = 0;
  for (size_t at = 0; (at = dc.log().find("cannot accept connections", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 1u) << dc.log();

  // Descriptors come back: the server drains the backlog and serves again.
  for (int fd : conns) ::close(fd);
  EXPECT_TRUE(eventually([&] { return dc.call("GET", "/api/v1/namespaces").first == 200; }, 15s)) << dc.log();
  EXPECT_TRUE(eventually([&] { return dc.log().find("accepting connections again") != std::string::npos; }, 5s))
      << dc.log();
}

TEST(DevclusterLimits, BodiesOverThreeMebibytesGet413StatusWithoutBeingRead) {
  DevclusterProcess dc("body");
  ASSERT_TRUE(dc.start()) << dc.log();
  const size_t limit = 3u << 20;  // kube-apiserver's --max-request-body-bytes default

  // Just under the limit is fine; just over is 413 with a Status kubectl and kube:: understand.
  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "big"}}}, {"data", {{"x", ""}}}};
  size_t overhead = cm.dump().size();
  cm["data"]["x"] = std::string(limit - overhead, 'a');
  ASSERT_EQ(cm.dump().size(), limit);
  auto [ok_code, ok_body] = dc.call("POST", "/api/v1/namespaces/default/configmaps", cm);
  EXPECT_EQ(ok_code, 201) << ok_body.dump().substr(0, 300);
  cm["metadata"]["name"] = "bigger";
  cm["data"]["x"] = std::string(limit - overhead + 1, 'a');
  auto [code, status] = dc.call("POST", "/api/v1/namespaces/default/configmaps", cm);
  EXPECT_EQ(code, 413) << status.dump().substr(0, 300);
  EXPECT_EQ(status.value("kind", ""), "Status");
  EXPECT_EQ(status.value("reason", ""), "RequestEntityTooLarge");
  EXPECT_EQ(status.value("message", ""), "Request entity too large: limit is 3145728");
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/default/configmaps/bigger").first, 404);

  // A declared 1 GiB body is refused from its headers, at once, before any of it arrives.
  std::string error;
  auto tls = flotilla::kube::net::TlsContext::client({read_text(dc.data_dir() / "pki" / "ca.crt"), "", "", false}, &error);
  ASSERT_TRUE(tls) << error;
  std::string kc = read_text(dc.kubeconfig());
  auto s = kc.find("server: ") + 8;
  auto conn = flotilla::kube::net::Connection::connect("127.0.0.1", port_of(kc.substr(s, kc.find('\n', s) - s)), tls,
                                                       2000ms, &error);
  ASSERT_TRUE(conn) << error;
  std::string token = read_text(dc.data_dir() / "token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(conn->write_all("POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                                token + "\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{",
                            1000ms),
            flotilla::kube::net::IoStatus::ok);
  std::string answer;
  char buf[4096];
  size_t n = 0;
  while (answer.find("}") == std::string::npos &&
         conn->read_some(buf, sizeof buf, &n, 3000ms) == flotilla::kube::net::IoStatus::ok)
    answer.append(buf, n);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  EXPECT_NE(answer.find("RequestEntityTooLarge"), std::string::npos) << answer;
  EXPECT_LT(seconds, 1.5) << "the answer waited for the body";

  // Real kubectl shows the reason instead of a reset connection or EOF.
  if (DevclusterProcess::have_kubectl()) {
    write_text(dc.dir() / "payload", std::string(limit + 1, 'b'));
    auto r = dc.kubectl("create configmap huge --from-file=payload=" + (dc.dir() / "payload").string());
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Request entity too large: limit is 3145728"), std::string::npos) << r.output;
  }
}
