// The HTTP/1.1 + TLS layer against itself over real loopback sockets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kube/net/http_client.h"
#include "kube/net/http_server.h"
#include "kube/net/x509.h"

using namespace flotilla::kube::net;
using namespace std::chrono_literals;

namespace {

struct Pki {
  PemPair ca, server, client;
  Pki() {
    std::string err;
    ca = issue_self_signed_ca("test-ca", 1, &err);
    server = issue_leaf(ca, {"server", {"localhost"}, {"127.0.0.1"}, {}, 1}, &err);
    client = issue_leaf(ca, {"alice", {}, {}, {"devs"}, 1}, &err);
    EXPECT_EQ(err, "");
  }
};

const Pki& pki() {
  static Pki p;
  return p;
}

std::unique_ptr<HttpServer> tls_server(Handler h, bool want_client_ca = false) {
  std::string err;
  auto ctx = TlsContext::server({pki().server.cert_pem, pki().server.key_pem,
                                 want_client_ca ? pki().ca.cert_pem : ""}, &err);
  EXPECT_TRUE(ctx) << err;
  ServerConfig cfg;
  cfg.tls = ctx;
  auto s = HttpServer::start(cfg, std::move(h), &err);
  EXPECT_TRUE(s) << err;
  return s;
}

std::unique_ptr<HttpClient> client_for(int port, ClientConfig cfg = {}) {
  cfg.server = "https://127.0.0.1:" + std::to_string(port);
  if (cfg.tls.ca_pem.empty()) cfg.tls.ca_pem = pki().ca.cert_pem;
  std::string err;
  auto c = HttpClient::create(cfg, &err);
  EXPECT_TRUE(c) << err;
  return c;
}

}  // namespace

TEST(DevclusterNet, TlsRequestResponseWithBearerTokenAndQuery) {
  auto server = tls_server([](const HttpRequest& req, ResponseWriter& w) {
    w.respond(200, req.method + " " + req.path() + " q=" + req.query_param("labelSelector") + " auth=" +
                       req.headers.get("authorization") + " body=" + req.body);
  });
  ClientConfig cfg;
  cfg.bearer_token = "sekret";
  auto client = client_for(server->port(), cfg);
  auto r = client->send("POST", "/api/v1/pods?labelSelector=app%3Dx%2Cy%21%3Dz", "{\"a\":1}");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.status, 200);
  EXPECT_EQ(r.response.body, "POST /api/v1/pods q=app=x,y!=z auth=Bearer sekret body={\"a\":1}");
  // Keep-alive: many sequential requests work (and reuse connections).
  for (int i = 0; i < 20; ++i) {
    auto again = client->get("/x");
    ASSERT_TRUE(again.ok()) << again.error;
    EXPECT_EQ(again.response.body.substr(0, 6), "GET /x");
  }
}

TEST(DevclusterNet, VerificationRejectsAnUnknownCaAndAWrongHost) {
  auto server = tls_server([](const HttpRequest&, ResponseWriter& w) { w.respond(200, "ok"); });
  std::string err;
  PemPair other = issue_self_signed_ca("other", 1, &err);
  ClientConfig cfg;
  cfg.tls.ca_pem = other.cert_pem;
  auto r = client_for(server->port(), cfg)->get("/");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("certificate verify failed"), std::string::npos) << r.error;

  // Right CA, but connecting by a name the certificate does not carry.
  cfg = {};
  cfg.server = "https://localhost.localdomain:" + std::to_string(server->port());
  cfg.tls.ca_pem = pki().ca.cert_pem;
  auto c = HttpClient::create(cfg, &err);
  ASSERT_TRUE(c);
  auto r2 = c->get("/");
  if (r2.error.find("resolve") == std::string::npos) {  // name may not resolve on this host
    EXPECT_FALSE(r2.ok());
  }

  cfg = {};
  cfg.tls.insecure_skip_verify = true;
  cfg.tls.ca_pem = other.cert_pem;
  auto r3 = client_for(server->port(), cfg)->get("/");
  EXPECT_TRUE(r3.ok()) << r3.error;
}

TEST(DevclusterNet, ClientCertificateCommonNameReachesHandler) {
  auto server = tls_server([](const HttpRequest&, ResponseWriter& w) { w.respond(200, w.peer_common_name()); },
                           true);
  ClientConfig cfg;
  cfg.tls.client_cert_pem = pki().client.cert_pem;
  cfg.tls.client_key_pem = pki().client.key_pem;
  auto r = client_for(server->port(), cfg)->get("/");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.body, "alice");
  auto anonymous = client_for(server->port())->get("/");
  ASSERT_TRUE(anonymous.ok()) << anonymous.error;
  EXPECT_EQ(anonymous.response.body, "");
}

TEST(DevclusterNet, StreamDeliversLinesAndCancelUnblocksTheReader) {
  std::atomic<int> handler_exits{0};
  auto server = tls_server([&](const HttpRequest&, ResponseWriter& w) {
    w.begin_stream(200, {});
    w.write_chunk("{\"n\":1}\n{\"n\"");
    w.write_chunk(":2}\n");
    while (!w.should_stop()) std::this_thread::sleep_for(10ms);
    ++handler_exits;
  });
  auto client = client_for(server->port());
  std::string err;
  HttpRequest req;
  req.target = "/watch";
  auto stream = client->open_stream(req, &err);
  ASSERT_TRUE(stream) << err;
  EXPECT_EQ(stream->head().status, 200);
  std::string line;
  ASSERT_EQ(stream->next_line(&line, 2000ms), StreamStatus::line);
  EXPECT_EQ(line, "{\"n\":1}");
  ASSERT_EQ(stream->next_line(&line, 2000ms), StreamStatus::line);
  EXPECT_EQ(line, "{\"n\":2}");
  EXPECT_EQ(stream->next_line(&line, 100ms), StreamStatus::timeout);
  auto t0 = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    stream->cancel();
  });
  EXPECT_EQ(stream->next_line(&line, 10000ms), StreamStatus::cancelled);
  canceller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  stream.reset();
  for (int i = 0; i < 100 && handler_exits == 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(handler_exits, 1) << "the server noticed the client leaving";
}

TEST(DevclusterNet, StoppingTheServerEndsStreamsAndJoins) {
  auto server = tls_server([&](const HttpRequest&, ResponseWriter& w) {
    w.begin_stream(200, {});
    w.write_chunk("hello\n");
    while (!w.should_stop()) std::this_thread::sleep_for(10ms);
  });
  auto client = client_for(server->port());
  std::string err;
  auto stream = client->open_stream(HttpRequest{}, &err);
  ASSERT_TRUE(stream) << err;
  std::string line;
  ASSERT_EQ(stream->next_line(&line, 2000ms), StreamStatus::line);
  auto t0 = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  auto st = stream->next_line(&line, 2000ms);
  EXPECT_TRUE(st == StreamStatus::end || st == StreamStatus::error) << static_cast<int>(st);
}

namespace {

int plain_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string read_until(int fd, const std::string& marker) {
  std::string got;
  char buf[1024];
  while (got.find(marker) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

}  // namespace

// A peer that connects and never starts the TLS handshake (a port probe, a client that hung)
// used to hold stop() for the whole 30 s read timeout.
TEST(DevclusterNet, StopDoesNotWaitForASilentPeerInTheHandshake) {
  auto server = tls_server([&](const HttpRequest&, ResponseWriter& w) { w.respond(200, "ok"); });
  int fd = plain_connect(server->port());
  std::this_thread::sleep_for(300ms);  // accepted; its thread now waits for a ClientHello
  auto t0 = std::chrono::steady_clock::now();
  server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  ::close(fd);
}


// curl sends `Expect: 100-continue` before bodies over 1 MiB and waits a second for the answer.
TEST(DevclusterNet, ExpectContinueGets100ThenTheResponseAndOversizedBodiesGet413) {
  ServerConfig cfg;
  cfg.max_body_bytes = 10;
  std::string err;
  auto server = HttpServer::start(cfg, [](const HttpRequest& req, ResponseWriter& w) { w.respond(200, "got " + req.body); }, &err);
  ASSERT_TRUE(server) << err;
  int fd = plain_connect(server->port());
  std::string head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  auto t0 = std::chrono::steady_clock::now();
  std::string interim = read_until(fd, "\r\n\r\n");
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
  ASSERT_EQ(::send(fd, "hello", 5, 0), 5);
  EXPECT_NE(read_until(fd, "got hello").find("got hello"), std::string::npos);
  ::close(fd);
  // Over the limit: the 413 comes instead of the 100, and no body is awaited.
  fd = plain_connect(server->port());
  head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  std::string refused = read_until(fd, "\r\n\r\n");
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  ::close(fd);
  // A chunked body has no length to refuse up front: it is read only until it passes the limit.
  fd = plain_connect(server->port());
  head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nghijkl\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  refused = read_until(fd, "\r\n\r\n");
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  ::close(fd);
}

TEST(DevclusterNet, NonSuccessStreamCarriesItsBodyAndPlainHttpWorks) {
  std::string err;
  ServerConfig cfg;
  auto server = HttpServer::start(cfg, [](const HttpRequest& req, ResponseWriter& w) {
    if (req.path() == "/gone") w.respond(410, "{\"kind\":\"Status\",\"code\":410}");
    else {
      w.begin_stream(200, {});
      for (int i = 0; i < 1000; ++i) w.write_chunk(std::to_string(i) + "\n");
    }
  }, &err);
  ASSERT_TRUE(server) << err;
  ClientConfig ccfg;
  ccfg.server = "http://127.0.0.1:" + std::to_string(server->port());
  auto client = HttpClient::create(ccfg, &err);
  HttpRequest req;
  req.target = "/gone";
  auto stream = client->open_stream(req, &err);
  ASSERT_TRUE(stream) << err;
  EXPECT_EQ(stream->head().status, 410);
  EXPECT_EQ(stream->head().body, "{\"kind\":\"Status\",\"code\":410}");
  req.target = "/count";
  stream = client->open_stream(req, &err);
  std::string line;
  int n = 0;
  while (stream->next_line(&line, 2000ms) == StreamStatus::line) {
    EXPECT_EQ(line, std::to_string(n));
    ++n;
  }
  EXPECT_EQ(n, 1000);
  // A non-streamed request to a handler that streams is still read fully (chunked body).
  auto r = client->get("/count");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.response.body.size(), 3890u);  // 10*2 + 90*3 + 900*4 bytes of "i\n"
}

TEST(DevclusterNet, MalformedRequestGets400) {
  std::string err;
  auto server = HttpServer::start({}, [](const HttpRequest&, ResponseWriter& w) { w.respond(200, "x"); }, &err);
  auto conn = Connection::connect("127.0.0.1", server->port(), nullptr, 1000ms, &err);
  ASSERT_TRUE(conn);
  ASSERT_EQ(conn->write_all("garbage\r\n\r\n", 1000ms), IoStatus::ok);
  MessageReader reader(*conn);
  HttpResponse resp;
  std::string bad;
  ASSERT_EQ(reader.read_response_head(&resp, 2000ms, &bad), IoStatus::ok) << bad;
  EXPECT_EQ(resp.status, 400);
}

TEST(DevclusterNet, UrlParsing) {
  Url u;
  ASSERT_TRUE(parse_url("https://10.0.0.1:6443/prefix/", &u));
  EXPECT_EQ(u.host, "10.0.0.1");
  EXPECT_EQ(u.port, 6443);
  EXPECT_EQ(u.path, "/prefix");
  ASSERT_TRUE(parse_url("https://[::1]", &u));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 443);
  EXPECT_FALSE(parse_url("ftp://x", &u));
  EXPECT_FALSE(parse_url("https://h:99999", &u));
}
