// An HTTP/1.1 server (plain or TLS): one thread per connection, keep-alive, and handlers that
// either respond once or stream a chunked body until the client leaves or the server stops.
//
// Guarantees: stop() closes the listener, shuts down every open connection (which unblocks
//   their threads) and joins all threads before returning; a handler that neither responds
//   nor streams gets a 500; a body over max_body_bytes gets 413 without being buffered (a
//   declared Content-Length is refused before reading; the rest of the upload is discarded for
//   up to 2 s so the client sees the answer instead of a reset); malformed requests get 400.
//   `Expect: 100-continue` gets `100 Continue` before the body is read (or the 413 at once).
//   Streaming handlers must check writer.should_stop() at least every few hundred ms.
//   When accept fails for want of a resource (EMFILE/ENFILE: out of file descriptors; ENOBUFS/
//   ENOMEM; no thread could be started) the acceptor backs off 5 ms doubling to 1 s instead of
//   spinning (what Go's net/http does), logs one line per episode naming the errno and the way
//   out, and one line when accepting works again. Connections wait in the listen backlog
//   meanwhile; none is refused by the server itself.
// Assumes: long-lived streams (watches) are few hundred at most, so a thread each is fine.
// Caveats: no pipelining (one request at a time per connection), no HTTP/2; the connection is
//   closed after a streamed response.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "kube/net/connection.h"
#include "kube/net/http_message.h"

namespace flotilla::kube::net {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 0;                           // 0 = pick a free port
  std::shared_ptr<TlsContext> tls;        // null = plain HTTP
  Millis keep_alive_idle{120000};         // idle time before a keep-alive connection is closed
  Millis read_timeout{30000};             // per read while a request is arriving
  Millis write_timeout{30000};
  size_t max_body_bytes = 64u << 20;
  // Where the server's own problems (accept failures) are reported; null = one line on stderr.
  std::function<void(const std::string&)> log;
  // The server's own error answers (400 malformed request, 413 body too large) as {content
  // type, body}; null = text/plain with the message.
  std::function<std::pair<std::string, std::string>(int status, const std::string& message)> error_body;
};

class ResponseWriter {
 public:
  // One complete response (Content-Length framed). Returns false if the client is gone.
  bool respond(int status, std::string body, const std::string& content_type = "application/json",
               Headers extra = {});
  // Starts a chunked response; then write_chunk() any number of times, then end_stream().
  bool begin_stream(int status, Headers headers);
  bool write_chunk(std::string_view data);
  void end_stream();
  // True when the server is stopping or the client closed its side.
  bool should_stop() const;
  bool responded() const { return responded_; }
  std::string peer_address() const { return conn_.peer_address(); }
  std::string peer_common_name() const { return conn_.peer_common_name(); }

 private:
  friend class HttpServer;
  ResponseWriter(Connection& conn, const std::atomic<bool>& stopping, Millis write_timeout)
      : conn_(conn), stopping_(stopping), write_timeout_(write_timeout) {}
  Connection& conn_;
  const std::atomic<bool>& stopping_;
  Millis write_timeout_;
  bool responded_ = false;
  bool streaming_ = false;
  bool streamed_ = false;
  bool failed_ = false;
  bool close_after_ = false;
};

using Handler = std::function<void(const HttpRequest&, ResponseWriter&)>;

class HttpServer {
 public:
  // Binds and starts accepting; nullptr and *error set when the address cannot be bound.
  static std::unique_ptr<HttpServer> start(const ServerConfig& config, Handler handler, std::string* error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  int port() const { return port_; }
  bool stopping() const { return stopping_.load(); }
  void stop();  // idempotent; joins every thread

 private:
  HttpServer() = default;
  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
    Connection* conn = nullptr;  // guarded by mutex_
  };
  void accept_loop();
  void log(const std::string& line) const;
  void respond_error(ResponseWriter& writer, int status, const std::string& message) const;
  void serve(Worker* worker, int fd);
  void reap(bool all);

  ServerConfig config_;
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::list<Worker> workers_;
};

}  // namespace flotilla::kube::net
