#include "kube/net/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <system_error>

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

namespace {

// accept4 errors that concern only the connection being accepted (it was reset or aborted while
// queued, or a signal interrupted the call): try the next one at once.
bool connection_error(int err) {
  switch (err) {
    case EINTR: case EAGAIN: case ECONNABORTED: case EPROTO: case ENETDOWN: case ENOPROTOOPT:
    case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

std::string errno_name(int err) {
  switch (err) {
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    case EAGAIN: return "EAGAIN";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    default: return "errno " + std::to_string(err);
  }
}

// What an operator can do about a failed accept.
std::string accept_remedy(int err) {
  if (err == EMFILE) {
    rlimit lim{};
    std::string limit = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY
                            ? " (limit " + std::to_string(lim.rlim_cur) + ")" : "";
    return "this process is out of file descriptors" + limit +
           ": raise the limit (`ulimit -n`, systemd LimitNOFILE) or close idle clients and watches";
  }
  if (err == ENFILE) return "the system is out of file descriptors: raise fs.file-max or stop other processes";
  if (err == ENOBUFS || err == ENOMEM) return "the system is out of socket memory";
  return "unexpected error on the listening socket";
}

}  // namespace

void HttpServer::log(const std::string& line) const {
  if (config_.log) config_.log(line);
  else std::cerr << line << "\n";
}

void HttpServer::accept_loop() {
  // Back-off state of one episode of failing accepts (as Go's net/http: 5 ms doubling to 1 s).
  constexpr Millis kFirstDelay{5}, kMaxDelay{1000};
  Millis delay{0};
  long failures = 0;
  auto episode_start = std::chrono::steady_clock::now();
  auto fail = [&](int err, const std::string& what) {
    if (failures++ == 0) {
      episode_start = std::chrono::steady_clock::now();
      log("cannot accept connections: " + what + " (" + errno_name(err) + "); " + accept_remedy(err) +
          "; retrying with back-off up to 1 s, new connections wait meanwhile");
    }
    delay = delay.count() == 0 ? kFirstDelay : std::min(delay * 2, kMaxDelay);
  };
  while (!stopping_.load()) {
    if (delay.count() > 0) {
      // The listener stays readable while we cannot accept, so poll would return at once.
      auto until = std::chrono::steady_clock::now() + delay;
      while (!stopping_.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min(Millis(50), std::chrono::duration_cast<Millis>(
                                                              until - std::chrono::steady_clock::now()) + Millis(1)));
      reap(false);  // finished connections give their descriptors back
      if (stopping_.load()) break;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    reap(false);
    if (r <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (!connection_error(err)) fail(err, std::strerror(err));
      continue;
    }
    std::lock_guard lock(mutex_);
    Worker& w = workers_.emplace_back();
    try {
      w.thread = std::thread([this, wp = &w, fd] { serve(wp, fd); });
    } catch (const std::system_error& e) {
      ::close(fd);
      workers_.pop_back();
      fail(e.code().value(), std::string("cannot start a thread for the connection: ") + e.what());
      continue;
    }
    if (failures > 0) {
      auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - episode_start).count();
      char took[32];
      std::snprintf(took, sizeof took, "%.1f", seconds);
      log("accepting connections again after " + std::to_string(failures) + " failed attempts over " + took + " s");
      failures = 0;
      delay = Millis(0);
    }
  }
}

void HttpServer::respond_error(ResponseWriter& writer, int status, const std::string& message) const {
  if (!config_.error_body) {
    writer.respond(status, message + "\n", "text/plain");
    return;
  }
  auto [content_type, body] = config_.error_body(status, message);
  writer.respond(status, std::move(body), content_type);
}

namespace {

// Reads and drops what is left of a refused upload (bounded in bytes and time, never buffered):
// closing with unread data makes the kernel send a reset, which can destroy the answer before
// the client reads it.
// unread_length: what the Content-Length says is left (as BodyReader parsed it), if any.
void discard_upload(MessageReader& reader, std::optional<size_t> unread_length) {
  size_t left = std::min<size_t>(16u << 20, unread_length.value_or(16u << 20));
  auto deadline = std::chrono::steady_clock::now() + Millis(2000);
  std::string scratch;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    scratch.clear();
    if (reader.read_up_to(std::min<size_t>(left, 64 * 1024), &scratch, Millis(200)) != IoStatus::ok) break;
    left -= std::min(left, scratch.size());
  }
}

}  // namespace

void HttpServer::serve(Worker* worker, int fd) {
  std::string error;
  auto conn = Connection::adopt_fd(fd, config_.tls);
  {
    // Registered before the handshake: a peer that connects and says nothing must not hold
    // stop() for the whole read timeout.
    std::lock_guard lock(mutex_);
    worker->conn = conn.get();
    if (stopping_.load()) conn->shutdown();
  }
  if (conn->server_handshake(config_.read_timeout, &error) == IoStatus::ok) {
    MessageReader reader(*conn);
    while (!stopping_.load()) {
      HttpRequest req;
      std::string bad;
      IoStatus st = reader.read_request_head(&req, config_.keep_alive_idle, &bad);
      ResponseWriter writer(*conn, stopping_, config_.write_timeout);
      if (st != IoStatus::ok) {
        if (!bad.empty()) {
          writer.close_after_ = true;
          respond_error(writer, 400, bad);
        }
        break;
      }
      BodyReader body(reader, req.headers, false);
      if (body.framing() == BodyReader::Framing::until_close) {
        // Requests without framing have no body.
      } else {
        // curl asks before sending bodies over 1 MiB and otherwise waits a second for this.
        if (iequals(req.headers.get("Expect"), "100-continue") && body.framing() != BodyReader::Framing::none &&
            body.unread_length().value_or(0) <= config_.max_body_bytes &&
            conn->write_all("HTTP/1.1 100 Continue\r\n\r\n", config_.write_timeout) != IoStatus::ok)
          break;
        st = body.read_all(&req.body, config_.max_body_bytes, config_.read_timeout, &bad);
        if (st != IoStatus::ok) {
          writer.close_after_ = true;
          if (bad == "body too large") {
            req.body.clear();
            respond_error(writer, 413, "Request entity too large: limit is " + std::to_string(config_.max_body_bytes));
            discard_upload(reader, body.unread_length());
          } else if (!bad.empty()) {
            respond_error(writer, 400, bad);
          }
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
  }
  {
    std::lock_guard lock(mutex_);
    worker->conn = nullptr;
  }
  conn.reset();
  worker->done.store(true);
}

}  // namespace flotilla::kube::net
