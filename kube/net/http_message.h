// HTTP/1.1 messages: request/response heads and bodies, their wire format, and URL helpers.
//
// Guarantees: the reader accepts Content-Length, chunked and read-until-close bodies and
//   enforces size limits (head 64 KiB, body as given) so a bad peer cannot exhaust memory;
//   header names compare case-insensitively; serialize_* always emits a framed message
//   (Content-Length unless the caller asked for chunked).
// Assumes: no HTTP/2, no trailers (they are read and dropped), no 100-continue.
// Caveats: header values are kept as sent (no folding of repeated headers).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/net/connection.h"

namespace flotilla::kube::net {

class Headers {
 public:
  void set(std::string name, std::string value);  // replaces any with the same name
  void add(std::string name, std::string value);
  const std::string* find(std::string_view name) const;
  std::string get(std::string_view name, std::string fallback = "") const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  void erase(std::string_view name);
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";  // path plus optional ?query, as on the request line
  Headers headers;
  std::string body;

  std::string path() const;                                   // decoded path, no query
  std::multimap<std::string, std::string> query() const;      // decoded query parameters
  std::string query_param(const std::string& name, const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  Headers headers;
  std::string body;
};

std::string reason_phrase(int status);
std::string url_decode(std::string_view text);
std::string url_encode(std::string_view text);  // encodes everything but unreserved characters
bool iequals(std::string_view a, std::string_view b);

// "https://host:port/base" → parts; false when it is not an http(s) URL.
struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;    // without brackets for IPv6
  int port = 0;
  std::string path;    // base path ("" or "/prefix")
};
bool parse_url(const std::string& text, Url* url);

// Buffered reading of HTTP framing from a Connection.
class MessageReader {
 public:
  explicit MessageReader(Connection& conn) : conn_(conn) {}
  // Reads one CRLF/LF-terminated line (terminator stripped).
  IoStatus read_line(std::string* line, Millis timeout, size_t max_bytes = 64 * 1024);
  IoStatus read_exact(size_t n, std::string* out, Millis timeout);
  // Reads whatever is buffered or the next piece from the socket (at least 1 byte when ok).
  IoStatus read_some(std::string* out, Millis timeout);
  // Appends between 1 and max_bytes bytes (whatever is buffered, else one socket read).
  IoStatus read_up_to(size_t max_bytes, std::string* out, Millis timeout);
  // Request line + headers. *bad is set (with a reason) when the peer sent malformed data.
  IoStatus read_request_head(HttpRequest* req, Millis timeout, std::string* bad);
  IoStatus read_response_head(HttpResponse* resp, Millis timeout, std::string* bad);
  IoStatus read_headers(Headers* headers, Millis timeout, std::string* bad);
  bool has_buffered() const { return pos_ < buf_.size(); }

 private:
  IoStatus fill(Millis timeout);
  Connection& conn_;
  std::string buf_;
  size_t pos_ = 0;
};

// Incremental body decoder over a MessageReader for one message.
class BodyReader {
 public:
  enum class Framing { none, length, chunked, until_close };
  BodyReader(MessageReader& reader, const Headers& headers, bool is_response_to_head_or_no_body);
  // Appends the next decoded piece to *out. Returns ok with *finished=true at the end.
  IoStatus next(std::string* out, bool* finished, Millis timeout, std::string* bad);
  // Reads the whole body (refusing more than max_bytes).
  IoStatus read_all(std::string* out, size_t max_bytes, Millis timeout, std::string* bad);
  Framing framing() const { return framing_; }
  // Content-Length framing: the bytes of the body not read yet (all of them before the first
  // read; read_all refuses more than its max_bytes before reading). Other framings: nullopt.
  std::optional<size_t> unread_length() const {
    return framing_ == Framing::length ? std::optional<size_t>(remaining_) : std::nullopt;
  }

 private:
  MessageReader& reader_;
  Framing framing_;
  size_t remaining_ = 0;  // length framing: bytes left; chunked: left in current chunk
  bool done_ = false;
};

std::string serialize_request_head(const HttpRequest& req, bool chunked = false);
std::string serialize_response_head(int status, const Headers& headers);
// Full response with Content-Length (headers may already hold Content-Type etc.).
std::string serialize_response(const HttpResponse& resp);
std::string encode_chunk(std::string_view data);  // "" data → the terminating chunk

}  // namespace flotilla::kube::net
