// An HTTP/1.1 client for one server (http:// or https://), with keep-alive connection reuse,
// bearer-token auth, and streaming responses (watches) delivered line by line.
//
// Guarantees: TLS verification is on unless the config says insecure_skip_verify; every call
//   has a connect timeout and a per-read timeout; a request that fails on a reused idle
//   connection before any response byte is retried once on a fresh connection; an HttpStream
//   can be cancelled from any thread (its next_line() then returns StreamStatus::cancelled).
//   The client is thread-safe: concurrent requests use separate connections.
// Assumes: responses are small enough to hold in memory (limit max_body_bytes) except streams.
// Caveats: no HTTP/2, no proxies, no redirects (the Kubernetes API does not need them).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kube/net/connection.h"
#include "kube/net/http_message.h"

namespace flotilla::kube::net {

struct ClientConfig {
  std::string server;  // "https://127.0.0.1:6443" (a path prefix is allowed)
  TlsClientOptions tls;
  std::string bearer_token;        // sent as "Authorization: Bearer ..." when set
  std::string user_agent = "flotilla/0.1";
  Millis connect_timeout{5000};
  Millis read_timeout{30000};      // per read while waiting for a normal response
  size_t max_body_bytes = 256u << 20;
  size_t max_idle_connections = 8;
};

struct HttpResult {
  std::string error;  // non-empty: transport failure (no HTTP response); status is then 0
  HttpResponse response;
  bool ok() const { return error.empty(); }
};

enum class StreamStatus { line, end, timeout, cancelled, error };

class HttpStream {
 public:
  // The response head; when the status is not 2xx the whole body is already in head().body
  // and next_line() returns end.
  const HttpResponse& head() const { return head_; }
  // Next '\n'-terminated line of the body (terminator stripped; a final unterminated line is
  // delivered too). idle_timeout bounds the wait for more bytes.
  StreamStatus next_line(std::string* line, Millis idle_timeout);
  std::string error() const { return error_; }
  void cancel();  // thread-safe
  ~HttpStream();

 private:
  friend class HttpClient;
  HttpStream() = default;
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<MessageReader> reader_;
  std::unique_ptr<BodyReader> body_;
  HttpResponse head_;
  std::string pending_;
  bool finished_ = false;
  bool unclean_end_ = false;
  std::atomic<bool> cancelled_{false};
  std::string error_;
};

class HttpClient {
 public:
  // nullptr and *error set when the URL or the TLS material is invalid.
  static std::unique_ptr<HttpClient> create(const ClientConfig& config, std::string* error);

  // Sends req (target is relative to the server's base path). Adds Host, Authorization,
  // User-Agent and Content-Length; keeps req's other headers.
  HttpResult send(HttpRequest req);
  HttpResult get(const std::string& target);
  // Convenience: method + target + JSON body (Content-Type as given).
  HttpResult send(const std::string& method, const std::string& target, std::string body = "",
                  const std::string& content_type = "application/json");

  // Opens a streaming request: returns after the response head arrives.
  // nullptr and *error set on transport failure.
  std::unique_ptr<HttpStream> open_stream(HttpRequest req, std::string* error);

  const ClientConfig& config() const { return config_; }
  const Url& url() const { return url_; }
  // Drops idle keep-alive connections (e.g. after the server restarted).
  void close_idle();

 private:
  HttpClient() = default;
  std::unique_ptr<Connection> take_connection(bool* reused, std::string* error);
  void give_back(std::unique_ptr<Connection> conn);
  void prepare(HttpRequest& req) const;

  ClientConfig config_;
  Url url_;
  std::shared_ptr<TlsContext> tls_;
  std::mutex idle_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace flotilla::kube::net
