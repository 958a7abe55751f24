#include "devcluster/api_types.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <mutex>

namespace flotilla::devcluster {

namespace {
std::string resource_label(const std::string& group, const std::string& plural) {
  return group.empty() ? plural : plural + "." + group;
}
std::mt19937_64& rng() {
  static std::mt19937_64 engine(std::random_device{}());
  return engine;
}
std::mutex& rng_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

Json status_json(const ApiError& e) {
  Json s = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", Json::object()},
            {"status", "Failure"}, {"message", e.message}, {"reason", e.reason}, {"code", e.code}};
  Json details = Json::object();
  if (!e.name.empty()) details["name"] = e.name;
  if (!e.group.empty()) details["group"] = e.group;
  if (!e.kind.empty()) details["kind"] = e.kind;
  if (!e.causes.empty()) {
    Json causes = Json::array();
    for (const auto& c : e.causes)
      causes.push_back({{"reason", c.reason}, {"message", c.message}, {"field", c.field}});
    details["causes"] = causes;
  }
  // kube-apiserver's constructors leave details out only for BadRequest, Unauthorized and
  // Expired; clients read details.name of a 404 without a nil check (kubectl debug panics).
  if (!details.empty() || (e.code != 400 && e.code != 401 && e.code != 410)) s["details"] = details;
  return s;
}

ApiError not_found(const std::string& group, const std::string& plural, const std::string& name) {
  return {404, "NotFound", resource_label(group, plural) + " \"" + name + "\" not found", plural, group, name, {}};
}

ApiError already_exists(const std::string& group, const std::string& plural, const std::string& name) {
  return {409, "AlreadyExists", resource_label(group, plural) + " \"" + name + "\" already exists", plural,
          group, name, {}};
}

ApiError conflict(const std::string& group, const std::string& plural, const std::string& name,
                  const std::string& why) {
  return {409, "Conflict",
          "Operation cannot be fulfilled on " + resource_label(group, plural) + " \"" + name + "\": " + why,
          plural, group, name, {}};
}

ApiError bad_request(const std::string& message) { return {400, "BadRequest", message, "", "", "", {}}; }

ApiError invalid(const std::string& group, const std::string& kind, const std::string& name,
                 std::vector<Cause> causes) {
  std::string msg = kind + (group.empty() ? "" : "." + group) + " \"" + name + "\" is invalid: ";
  if (causes.size() == 1) {
    msg += causes[0].field + ": " + causes[0].message;
  } else {
    msg += "[";
    for (size_t i = 0; i < causes.size(); ++i)
      msg += (i ? ", " : "") + causes[i].field + ": " + causes[i].message;
    msg += "]";
  }
  return {422, "Invalid", msg, kind, group, name, std::move(causes)};
}

std::string rfc3339(long long unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string now_rfc3339() { return rfc3339(static_cast<long long>(std::time(nullptr))); }

long long parse_rfc3339(const std::string& text) {
  std::tm tm{};
  if (text.size() < 19 || sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                                 &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<long long>(timegm(&tm));
}

std::string random_hex(int bytes) {
  static const char* hex = "0123456789abcdef";
  std::lock_guard lock(rng_mutex());
  std::string out;
  for (int i = 0; i < bytes; ++i) {
    auto v = rng()() & 0xff;
    out += hex[v >> 4];
    out += hex[v & 15];
  }
  return out;
}

std::string new_uid() {
  std::string h = random_hex(16);
  h[12] = '4';
  h[16] = "89ab"[h[16] % 4];
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

std::string random_suffix(int n) {
  static const char* alphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::lock_guard lock(rng_mutex());
  std::string out;
  for (int i = 0; i < n; ++i) out += alphabet[rng()() % 27];
  return out;
}

namespace {

void eval_steps(const Json& node, const std::string& path, size_t pos, std::vector<Json>& out) {
  if (pos >= path.size()) {
    out.push_back(node);
    return;
  }
  if (path[pos] == '.') {
    size_t end = path.find_first_of(".[", pos + 1);
    std::string key = path.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    if (key.empty()) return eval_steps(node, path, pos + 1, out);
    if (node.is_object() && node.contains(key))
      eval_steps(node[key], path, end == std::string::npos ? path.size() : end, out);
    return;
  }
  if (path[pos] == '[') {
    size_t close = path.find(']', pos);
    if (close == std::string::npos || !node.is_array()) return;
    std::string inside = path.substr(pos + 1, close - pos - 1);
    if (inside == "*") {
      for (const auto& el : node) eval_steps(el, path, close + 1, out);
    } else if (inside.rfind("?(@.", 0) == 0) {
      // ?(@.key=="value")
      auto eq = inside.find("==");
      if (eq == std::string::npos) return;
      std::string key = inside.substr(4, eq - 4);
      std::string value = inside.substr(eq + 2);
      if (!value.empty() && value.back() == ')') value.pop_back();
      if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'')) value = value.substr(1, value.size() - 2);
      for (const auto& el : node) {
        if (!el.is_object() || !el.contains(key)) continue;
        const Json& v = el[key];
        std::string text = v.is_string() ? v.get<std::string>() : v.dump();
        if (text == value) eval_steps(el, path, close + 1, out);
      }
    } else {
      try {
        long idx = std::stol(inside);
        if (idx < 0) idx += static_cast<long>(node.size());
        if (idx >= 0 && static_cast<size_t>(idx) < node.size()) eval_steps(node[idx], path, close + 1, out);
      } catch (...) {
      }
    }
  }
}

}  // namespace

std::vector<Json> jsonpath_eval(const Json& object, const std::string& raw) {
  std::string path = raw;
  if (!path.empty() && path.front() == '{' && path.back() == '}') path = path.substr(1, path.size() - 2);
  if (!path.empty() && path[0] == '$') path = path.substr(1);
  if (!path.empty() && path[0] != '.' && path[0] != '[') path = "." + path;
  std::vector<Json> out;
  eval_steps(object, path, 0, out);
  return out;
}

std::string base64_encode(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    out += t[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string base64_decode(const std::string& in) {
  std::string out;
  int val = 0, bits = -8;
  for (unsigned char c : in) {
    int d;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    else if (c >= '0' && c <= '9') d = c - '0' + 52;
    else if (c == '+') d = 62;
    else if (c == '/') d = 63;
    else continue;
    val = (val << 6) + d;
    bits += 6;
    if (bits >= 0) {
      out += static_cast<char>((val >> bits) & 0xff);
      bits -= 8;
    }
  }
  return out;
}

std::string human_age(long long s) {
  if (s < 0) s = 0;
  if (s < 120) return std::to_string(s) + "s";
  if (s < 60 * 60) return std::to_string(s / 60) + "m";
  if (s < 48 * 3600) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

}  // namespace flotilla::devcluster
