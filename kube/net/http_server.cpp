#include "kube/net/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace flotilla::kube::net {

bool ResponseWriter::respond(int status, std::string body, const std::string& content_type, Headers extra) {
  if (responded_) return false;
  responded_ = true;
  if (!content_type.empty() && !extra.has("Content-Type")) extra.set("Content-Type", content_type);
  if (close_after_) extra.set("Connection", "close");
  HttpResponse resp{status, "", std::move(extra), std::move(body)};
  failed_ = conn_.write_all(serialize_response(resp), write_timeout_) != IoStatus::ok;
  return !failed_;
}

bool ResponseWriter::begin_stream(int status, Headers headers) {
  if (responded_) return false;
  responded_ = streaming_ = streamed_ = true;
  headers.set("Transfer-Encoding", "chunked");
  headers.set("Connection", "close");
  failed_ = conn_.write_all(serialize_response_head(status, headers), write_timeout_) != IoStatus::ok;
  return !failed_;
}

bool ResponseWriter::write_chunk(std::string_view data) {
  if (!streaming_ || failed_ || data.empty()) return !failed_ && streaming_;
  failed_ = conn_.write_all(encode_chunk(data), write_timeout_) != IoStatus::ok;
  return !failed_;
}

void ResponseWriter::end_stream() {
  if (!streaming_ || failed_) return;
  failed_ = conn_.write_all(encode_chunk(""), write_timeout_) != IoStatus::ok;
  streaming_ = false;
}

bool ResponseWriter::should_stop() const { return failed_ || stopping_.load() || conn_.peer_closed(); }

std::unique_ptr<HttpServer> HttpServer::start(const ServerConfig& config, Handler handler, std::string* error) {
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->config_ = config;
  server->handler_ = std::move(handler);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(config.port);
  if (int rc = getaddrinfo(config.host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    *error = "cannot resolve listen address " + config.host + ": " + gai_strerror(rc);
    return nullptr;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 512) != 0) {
    *error = "cannot listen on " + config.host + ":" + port_text + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    freeaddrinfo(res);
    return nullptr;
  }
  freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  server->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  server->listen_fd_ = fd;
  server->acceptor_ = std::thread([s = server.get()] { s->accept_loop(); });
  return server;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop() {
  if (stopping_.exchange(true)) {
    if (acceptor_.joinable()) acceptor_.join();
    return;
  }
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  {
    std::lock_guard lock(mutex_);
    for (auto& w : workers_)
      if (w.conn) w.conn->shutdown();
  }
  reap(true);
}

void HttpServer::reap(bool all) {
  std::list<Worker> finished;
  {
    std::lock_guard lock(mutex_);
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (all || it->done.load()) finished.splice(finished.end(), workers_, it);
      it = next;
    }
  }
  for (auto& w : finished)
    if (w.thread.joinable()) w.thread.join();
}

void HttpServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    reap(false);
    if (r <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(mutex_);
    Worker& w = workers_.emplace_back();
    w.thread = std::thread([this, wp = &w, fd] { serve(wp, fd); });
  }
}

void HttpServer::serve(Worker* worker, int fd) {
  std::string error;
  auto conn = Connection::accept_fd(fd, config_.tls, config_.read_timeout, &error);
  if (conn) {
    {
      std::lock_guard lock(mutex_);
      worker->conn = conn.get();
      if (stopping_.load()) conn->shutdown();
    }
    MessageReader reader(*conn);
    while (!stopping_.load()) {
      HttpRequest req;
      std::string bad;
      IoStatus st = reader.read_request_head(&req, config_.keep_alive_idle, &bad);
      ResponseWriter writer(*conn, stopping_, config_.write_timeout);
      if (st != IoStatus::ok) {
        if (!bad.empty()) {
          writer.close_after_ = true;
          writer.respond(400, bad + "\n", "text/plain");
        }
        break;
      }
      BodyReader body(reader, req.headers, false);
      if (body.framing() == BodyReader::Framing::until_close) {
        // Requests without framing have no body.
      } else {
        st = body.read_all(&req.body, config_.max_body_bytes, config_.read_timeout, &bad);
        if (st != IoStatus::ok) {
          writer.close_after_ = true;
          if (!bad.empty()) writer.respond(bad == "body too large" ? 413 : 400, bad + "\n", "text/plain");
          break;
        }
      }
      bool close = iequals(req.headers.get("Connection"), "close");
      writer.close_after_ = close;
      handler_(req, writer);
      if (!writer.responded_) writer.respond(500, "handler did not respond\n", "text/plain");
      bool streamed = writer.streamed_;
      if (writer.streaming_) writer.end_stream();
      // A streamed response is always the last on its connection.
      if (writer.failed_ || writer.close_after_ || streamed) break;
    }
    std::lock_guard lock(mutex_);
    worker->conn = nullptr;
  }
  conn.reset();  // accept_fd owns fd even when it fails
  worker->done.store(true);
}

}  // namespace flotilla::kube::net
