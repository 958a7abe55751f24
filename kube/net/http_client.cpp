#include "kube/net/http_client.h"

namespace flotilla::kube::net {

std::unique_ptr<HttpClient> HttpClient::create(const ClientConfig& config, std::string* error) {
  std::unique_ptr<HttpClient> client(new HttpClient());
  client->config_ = config;
  if (!parse_url(config.server, &client->url_)) {
    *error = "server URL '" + config.server + "' is not http(s)://host[:port][/path]";
    return nullptr;
  }
  if (client->url_.scheme == "https") {
    client->tls_ = TlsContext::client(config.tls, error);
    if (!client->tls_) return nullptr;
  }
  return client;
}

void HttpClient::prepare(HttpRequest& req) const {
  req.target = url_.path + req.target;
  if (!req.headers.has("Host")) {
    bool v6 = url_.host.find(':') != std::string::npos;
    req.headers.set("Host", (v6 ? "[" + url_.host + "]" : url_.host) + ":" + std::to_string(url_.port));
  }
  if (!config_.bearer_token.empty() && !req.headers.has("Authorization"))
    req.headers.set("Authorization", "Bearer " + config_.bearer_token);
  if (!req.headers.has("User-Agent")) req.headers.set("User-Agent", config_.user_agent);
  if (!req.headers.has("Accept")) req.headers.set("Accept", "application/json");
}

std::unique_ptr<Connection> HttpClient::take_connection(bool* reused, std::string* error) {
  {
    std::lock_guard lock(idle_mutex_);
    while (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      if (!conn->peer_closed()) {
        *reused = true;
        return conn;
      }
    }
  }
  *reused = false;
  return Connection::connect(url_.host, url_.port, tls_, config_.connect_timeout, error);
}

void HttpClient::give_back(std::unique_ptr<Connection> conn) {
  std::lock_guard lock(idle_mutex_);
  if (idle_.size() < config_.max_idle_connections) idle_.push_back(std::move(conn));
}

void HttpClient::close_idle() {
  std::lock_guard lock(idle_mutex_);
  idle_.clear();
}

HttpResult HttpClient::get(const std::string& target) {
  HttpRequest req;
  req.target = target;
  return send(std::move(req));
}

HttpResult HttpClient::send(const std::string& method, const std::string& target, std::string body,
                            const std::string& content_type) {
  HttpRequest req;
  req.method = method;
  req.target = target;
  req.body = std::move(body);
  if (!req.body.empty()) req.headers.set("Content-Type", content_type);
  return send(std::move(req));
}

HttpResult HttpClient::send(HttpRequest req) {
  prepare(req);
  std::string wire = serialize_request_head(req) + req.body;
  for (int attempt = 0; attempt < 2; ++attempt) {
    HttpResult result;
    bool reused = false;
    auto conn = take_connection(&reused, &result.error);
    if (!conn) return result;
    MessageReader reader(*conn);
    IoStatus st = conn->write_all(wire, config_.read_timeout);
    std::string bad;
    if (st == IoStatus::ok) st = reader.read_response_head(&result.response, config_.read_timeout, &bad);
    if (st != IoStatus::ok) {
      // A stale keep-alive connection fails before any byte of the response: retry once.
      if (reused && (st == IoStatus::eof || st == IoStatus::error) && bad.empty()) continue;
      result.error = !bad.empty() ? "bad response: " + bad
                   : st == IoStatus::timeout ? "timed out waiting for the response"
                                             : "connection lost while waiting for the response";
      result.response = {};
      return result;
    }
    BodyReader body(reader, result.response.headers, req.method == "HEAD" ||
                                                         result.response.status == 204 ||
                                                         result.response.status == 304);
    st = body.read_all(&result.response.body, config_.max_body_bytes, config_.read_timeout, &bad);
    if (st != IoStatus::ok) {
      result.error = !bad.empty() ? "bad response body: " + bad : "connection lost while reading the body";
      result.response = {};
      return result;
    }
    bool keep = body.framing() != BodyReader::Framing::until_close &&
                !iequals(result.response.headers.get("Connection"), "close") && !reader.has_buffered();
    if (keep) give_back(std::move(conn));
    return result;
  }
  return {"connection closed by the server twice", {}};
}

std::unique_ptr<HttpStream> HttpClient::open_stream(HttpRequest req, std::string* error) {
  prepare(req);
  std::unique_ptr<HttpStream> stream(new HttpStream());
  // Streams hold their connection for their lifetime: always a fresh one.
  stream->conn_ = Connection::connect(url_.host, url_.port, tls_, config_.connect_timeout, error);
  if (!stream->conn_) return nullptr;
  stream->reader_ = std::make_unique<MessageReader>(*stream->conn_);
  std::string bad;
  IoStatus st = stream->conn_->write_all(serialize_request_head(req) + req.body, config_.read_timeout);
  if (st == IoStatus::ok) st = stream->reader_->read_response_head(&stream->head_, config_.read_timeout, &bad);
  if (st != IoStatus::ok) {
    *error = !bad.empty() ? "bad response: " + bad : "no response head: connection lost or timed out";
    return nullptr;
  }
  stream->body_ = std::make_unique<BodyReader>(*stream->reader_, stream->head_.headers, false);
  if (stream->head_.status < 200 || stream->head_.status >= 300) {
    st = stream->body_->read_all(&stream->head_.body, config_.max_body_bytes, config_.read_timeout, &bad);
    stream->finished_ = true;
  }
  return stream;
}

StreamStatus HttpStream::next_line(std::string* line, Millis idle_timeout) {
  for (;;) {
    if (cancelled_.load()) return StreamStatus::cancelled;
    auto nl = pending_.find('\n');
    if (nl != std::string::npos) {
      line->assign(pending_, 0, nl);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      pending_.erase(0, nl + 1);
      return StreamStatus::line;
    }
    if (finished_) {
      if (!pending_.empty()) {
        *line = std::move(pending_);
        pending_.clear();
        return StreamStatus::line;
      }
      return unclean_end_ ? StreamStatus::error : StreamStatus::end;
    }
    bool done = false;
    std::string bad;
    IoStatus st = body_->next(&pending_, &done, idle_timeout, &bad);
    if (cancelled_.load()) return StreamStatus::cancelled;
    if (st == IoStatus::timeout) return StreamStatus::timeout;
    if (st != IoStatus::ok) {
      error_ = !bad.empty() ? bad : st == IoStatus::eof ? "server closed the stream" : "stream read failed";
      if (st != IoStatus::eof) return StreamStatus::error;
      // Closed without the final chunk: deliver what arrived, then report the error.
      finished_ = true;
      unclean_end_ = true;
      continue;
    }
    if (done) finished_ = true;
  }
}

void HttpStream::cancel() {
  cancelled_.store(true);
  if (conn_) conn_->shutdown();
}

HttpStream::~HttpStream() = default;

}  // namespace flotilla::kube::net
