#include "kube/net/http_message.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace flotilla::kube::net {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

void Headers::set(std::string name, std::string value) {
  erase(name);
  items_.emplace_back(std::move(name), std::move(value));
}
void Headers::add(std::string name, std::string value) { items_.emplace_back(std::move(name), std::move(value)); }
const std::string* Headers::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (iequals(k, name)) return &v;
  return nullptr;
}
std::string Headers::get(std::string_view name, std::string fallback) const {
  const std::string* v = find(name);
  return v ? *v : fallback;
}
void Headers::erase(std::string_view name) {
  std::erase_if(items_, [&](const auto& kv) { return iequals(kv.first, name); });
}

namespace {
// %XX decoding; '+' means a space only in query strings, never in paths.
std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      int v = 0;
      auto r = std::from_chars(text.data() + i + 1, text.data() + i + 3, v, 16);
      if (r.ec == std::errc() && r.ptr == text.data() + i + 3) {
        out += static_cast<char>(v);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && c == '+') ? ' ' : c;
  }
  return out;
}
}  // namespace

std::string url_decode(std::string_view text) { return percent_decode(text, true); }

std::string url_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string HttpRequest::path() const {
  return percent_decode(std::string_view(target).substr(0, target.find('?')), false);
}

std::multimap<std::string, std::string> HttpRequest::query() const {
  std::multimap<std::string, std::string> out;
  auto q = target.find('?');
  if (q == std::string::npos) return out;
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    std::string_view part = rest.substr(0, amp);
    if (!part.empty()) {
      auto eq = part.find('=');
      if (eq == std::string_view::npos) out.emplace(url_decode(part), "");
      else out.emplace(url_decode(part.substr(0, eq)), url_decode(part.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

std::string HttpRequest::query_param(const std::string& name, const std::string& fallback) const {
  auto q = query();
  auto it = q.find(name);
  return it == q.end() ? fallback : it->second;
}

std::string reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

bool parse_url(const std::string& text, Url* url) {
  auto sep = text.find("://");
  if (sep == std::string::npos) return false;
  url->scheme = text.substr(0, sep);
  if (url->scheme != "http" && url->scheme != "https") return false;
  std::string rest = text.substr(sep + 3);
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  url->path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!url->path.empty() && url->path.back() == '/') url->path.pop_back();
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos) return false;
    url->host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port_text = authority.substr(close + 2);
  } else {
    auto colon = authority.rfind(':');
    url->host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (url->host.empty()) return false;
  if (port_text.empty()) {
    url->port = url->scheme == "https" ? 443 : 80;
  } else {
    auto r = std::from_chars(port_text.data(), port_text.data() + port_text.size(), url->port);
    if (r.ec != std::errc() || url->port <= 0 || url->port > 65535) return false;
  }
  return true;
}

IoStatus MessageReader::fill(Millis timeout) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > 64 * 1024) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  char tmp[16 * 1024];
  size_t n = 0;
  IoStatus st = conn_.read_some(tmp, sizeof tmp, &n, timeout);
  if (st == IoStatus::ok) buf_.append(tmp, n);
  return st;
}

IoStatus MessageReader::read_line(std::string* line, Millis timeout, size_t max_bytes) {
  for (;;) {
    auto nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      size_t end = nl;
      if (end > pos_ && buf_[end - 1] == '\r') --end;
      line->assign(buf_, pos_, end - pos_);
      pos_ = nl + 1;
      return IoStatus::ok;
    }
    if (buf_.size() - pos_ > max_bytes) return IoStatus::error;
    if (IoStatus st = fill(timeout); st != IoStatus::ok) return st;
  }
}

IoStatus MessageReader::read_exact(size_t n, std::string* out, Millis timeout) {
  while (buf_.size() - pos_ < n)
    if (IoStatus st = fill(timeout); st != IoStatus::ok) return st;
  out->append(buf_, pos_, n);
  pos_ += n;
  return IoStatus::ok;
}

IoStatus MessageReader::read_some(std::string* out, Millis timeout) {
  if (pos_ == buf_.size())
    if (IoStatus st = fill(timeout); st != IoStatus::ok) return st;
  out->append(buf_, pos_, std::string::npos);
  pos_ = buf_.size();
  return IoStatus::ok;
}

IoStatus MessageReader::read_up_to(size_t max_bytes, std::string* out, Millis timeout) {
  if (pos_ == buf_.size())
    if (IoStatus st = fill(timeout); st != IoStatus::ok) return st;
  size_t n = std::min(max_bytes, buf_.size() - pos_);
  out->append(buf_, pos_, n);
  pos_ += n;
  return IoStatus::ok;
}

IoStatus MessageReader::read_headers(Headers* headers, Millis timeout, std::string* bad) {
  size_t total = 0;
  for (;;) {
    std::string line;
    if (IoStatus st = read_line(&line, timeout); st != IoStatus::ok) {
      if (st == IoStatus::error) *bad = "header line too long";
      return st;
    }
    if (line.empty()) return IoStatus::ok;
    total += line.size();
    if (total > 64 * 1024) {
      *bad = "headers too large";
      return IoStatus::error;
    }
    auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) {
      *bad = "malformed header line";
      return IoStatus::error;
    }
    std::string value = line.substr(colon + 1);
    size_t b = value.find_first_not_of(" \t");
    size_t e = value.find_last_not_of(" \t");
    headers->add(line.substr(0, colon), b == std::string::npos ? "" : value.substr(b, e - b + 1));
  }
}

IoStatus MessageReader::read_request_head(HttpRequest* req, Millis timeout, std::string* bad) {
  std::string line;
  do {  // tolerate stray blank lines between keep-alive requests
    if (IoStatus st = read_line(&line, timeout); st != IoStatus::ok) {
      if (st == IoStatus::error) *bad = "request line too long";
      return st;
    }
  } while (line.empty());
  auto s1 = line.find(' ');
  auto s2 = line.rfind(' ');
  if (s1 == std::string::npos || s2 == s1 || line.compare(s2 + 1, 5, "HTTP/") != 0) {
    *bad = "malformed request line";
    return IoStatus::error;
  }
  req->method = line.substr(0, s1);
  req->target = line.substr(s1 + 1, s2 - s1 - 1);
  return read_headers(&req->headers, timeout, bad);
}

IoStatus MessageReader::read_response_head(HttpResponse* resp, Millis timeout, std::string* bad) {
  std::string line;
  if (IoStatus st = read_line(&line, timeout); st != IoStatus::ok) return st;
  // "HTTP/1.1 200 OK"
  if (line.compare(0, 5, "HTTP/") != 0 || line.size() < 12) {
    *bad = "malformed status line: " + line.substr(0, 80);
    return IoStatus::error;
  }
  auto s1 = line.find(' ');
  int code = 0;
  auto r = std::from_chars(line.data() + s1 + 1, line.data() + std::min(line.size(), s1 + 4), code);
  if (r.ec != std::errc()) {
    *bad = "malformed status code";
    return IoStatus::error;
  }
  resp->status = code;
  resp->reason = s1 + 5 <= line.size() ? line.substr(s1 + 5) : "";
  return read_headers(&resp->headers, timeout, bad);
}

BodyReader::BodyReader(MessageReader& reader, const Headers& headers, bool no_body) : reader_(reader) {
  std::string te = headers.get("Transfer-Encoding");
  if (no_body) {
    framing_ = Framing::none;
  } else if (!te.empty() && te.find("chunked") != std::string::npos) {
    framing_ = Framing::chunked;
  } else if (const std::string* cl = headers.find("Content-Length")) {
    framing_ = Framing::length;
    std::from_chars(cl->data(), cl->data() + cl->size(), remaining_);
  } else {
    framing_ = Framing::until_close;
  }
  if (framing_ == Framing::none || (framing_ == Framing::length && remaining_ == 0)) done_ = true;
}

IoStatus BodyReader::next(std::string* out, bool* finished, Millis timeout, std::string* bad) {
  *finished = false;
  if (done_) {
    *finished = true;
    return IoStatus::ok;
  }
  switch (framing_) {
    case Framing::none:
      break;
    case Framing::length: {
      size_t before = out->size();
      IoStatus st = reader_.read_up_to(remaining_, out, timeout);
      if (st != IoStatus::ok) return st == IoStatus::eof ? IoStatus::error : st;
      remaining_ -= out->size() - before;
      if (remaining_ == 0) done_ = *finished = true;
      return IoStatus::ok;
    }
    case Framing::until_close: {
      IoStatus st = reader_.read_some(out, timeout);
      if (st == IoStatus::eof) {
        done_ = *finished = true;
        return IoStatus::ok;
      }
      return st;
    }
    case Framing::chunked: {
      if (remaining_ == 0) {
        std::string line;
        if (IoStatus st = reader_.read_line(&line, timeout, 4096); st != IoStatus::ok) return st;
        size_t size = 0;
        auto r = std::from_chars(line.data(), line.data() + line.size(), size, 16);
        if (r.ec != std::errc()) {
          *bad = "malformed chunk size";
          return IoStatus::error;
        }
        if (size == 0) {  // trailers until blank line
          for (;;) {
            if (IoStatus st = reader_.read_line(&line, timeout, 4096); st != IoStatus::ok) return st;
            if (line.empty()) break;
          }
          done_ = *finished = true;
          return IoStatus::ok;
        }
        remaining_ = size;
      }
      size_t before = out->size();
      if (IoStatus st = reader_.read_up_to(remaining_, out, timeout); st != IoStatus::ok) return st;
      remaining_ -= out->size() - before;
      if (remaining_ == 0) {
        std::string crlf;
        if (IoStatus s = reader_.read_line(&crlf, timeout, 16); s != IoStatus::ok) return s;
      }
      return IoStatus::ok;
    }
  }
  done_ = *finished = true;
  return IoStatus::ok;
}

IoStatus BodyReader::read_all(std::string* out, size_t max_bytes, Millis timeout, std::string* bad) {
  if (framing_ == Framing::length) {
    if (remaining_ > max_bytes) {
      *bad = "body too large";
      return IoStatus::error;
    }
    IoStatus st = reader_.read_exact(remaining_, out, timeout);
    if (st == IoStatus::ok) {
      remaining_ = 0;
      done_ = true;
    }
    return st;
  }
  bool finished = false;
  while (!finished) {
    if (IoStatus st = next(out, &finished, timeout, bad); st != IoStatus::ok) return st;
    if (out->size() > max_bytes) {
      *bad = "body too large";
      return IoStatus::error;
    }
  }
  return IoStatus::ok;
}

std::string serialize_request_head(const HttpRequest& req, bool chunked) {
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  for (const auto& [k, v] : req.headers.items()) out += k + ": " + v + "\r\n";
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  else if (!req.headers.has("Content-Length") && (!req.body.empty() || req.method == "POST" ||
                                                   req.method == "PUT" || req.method == "PATCH"))
    out += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  out += "\r\n";
  return out;
}

std::string serialize_response_head(int status, const Headers& headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  for (const auto& [k, v] : headers.items()) out += k + ": " + v + "\r\n";
  out += "\r\n";
  return out;
}

std::string serialize_response(const HttpResponse& resp) {
  Headers h = resp.headers;
  h.set("Content-Length", std::to_string(resp.body.size()));
  return serialize_response_head(resp.status, h) + resp.body;
}

std::string encode_chunk(std::string_view data) {
  if (data.empty()) return "0\r\n\r\n";
  char size[20];
  auto r = std::to_chars(size, size + sizeof size, data.size(), 16);
  std::string out(size, r.ptr);
  out += "\r\n";
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace flotilla::kube::net
