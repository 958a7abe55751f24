#include "kube/error.h"

#include <nlohmann/json.hpp>

namespace flotilla::kube {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::BadRequest: return "BadRequest";
    case ErrorKind::Unauthorized: return "Unauthorized";
    case ErrorKind::Forbidden: return "Forbidden";
    case ErrorKind::NotFound: return "NotFound";
    case ErrorKind::MethodNotAllowed: return "MethodNotAllowed";
    case ErrorKind::AlreadyExists: return "AlreadyExists";
    case ErrorKind::Conflict: return "Conflict";
    case ErrorKind::Gone: return "Gone";
    case ErrorKind::Invalid: return "Invalid";
    case ErrorKind::Transient: return "Transient";
    case ErrorKind::Config: return "Config";
    case ErrorKind::Decode: return "Decode";
    case ErrorKind::Other: return "Other";
  }
  return "Other";
}

std::string Error::describe() const {
  std::string out(to_string(kind));
  if (http_status != 0) out += " (" + std::to_string(http_status) + ")";
  out += ": " + (message.empty() ? reason : message);
  if (!causes.empty()) {
    out += " [";
    for (size_t i = 0; i < causes.size(); ++i) {
      if (i) out += "; ";
      out += causes[i].field.empty() ? causes[i].message : causes[i].field + ": " + causes[i].message;
    }
    out += "]";
  }
  return out;
}

bool Error::resource_version_too_large() const {
  for (const auto& c : causes)
    if (c.reason == "ResourceVersionTooLarge") return true;
  return false;
}

static ErrorKind kind_from(int status, const std::string& reason) {
  // Reason first where the status code is ambiguous (409 → AlreadyExists or Conflict).
  if (reason == "AlreadyExists") return ErrorKind::AlreadyExists;
  if (reason == "Expired" || reason == "Gone") return ErrorKind::Gone;
  switch (status) {
    case 400: return ErrorKind::BadRequest;
    case 401: return ErrorKind::Unauthorized;
    case 403: return ErrorKind::Forbidden;
    case 404: return ErrorKind::NotFound;
    case 405: return ErrorKind::MethodNotAllowed;
    case 409: return ErrorKind::Conflict;
    case 410: return ErrorKind::Gone;
    case 422: return ErrorKind::Invalid;
    case 429: return ErrorKind::Transient;
    default: break;
  }
  if (status >= 500) return ErrorKind::Transient;
  return ErrorKind::Other;
}

Error error_from_response(int http_status, std::string_view body) {
  Error e;
  e.http_status = http_status;
  auto status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && status.value("kind", "") == "Status") {
    e.reason = status.value("reason", "");
    e.message = status.value("message", "");
    if (int code = status.value("code", 0); code != 0) e.http_status = code;
    if (auto d = status.find("details"); d != status.end() && d->is_object()) {
      if (auto c = d->find("causes"); c != d->end() && c->is_array()) {
        for (const auto& cause : *c) {
          if (!cause.is_object()) continue;
          e.causes.push_back({cause.value("reason", ""), cause.value("message", ""),
                              cause.value("field", "")});
        }
      }
      if (auto r = d->find("retryAfterSeconds"); r != d->end() && r->is_number_integer())
        e.retry_after = std::chrono::seconds(r->get<long>());
    }
  } else {
    e.message = std::string(body.substr(0, 512));
  }
  e.kind = kind_from(e.http_status, e.reason);
  if (e.message.empty()) e.message = "HTTP " + std::to_string(e.http_status);
  return e;
}

static Error client_side(ErrorKind kind, std::string message) {
  Error e;
  e.kind = kind;
  e.message = std::move(message);
  return e;
}

Error transport_error(std::string message) { return client_side(ErrorKind::Transient, std::move(message)); }
Error config_error(std::string message) { return client_side(ErrorKind::Config, std::move(message)); }
Error decode_error(std::string message) { return client_side(ErrorKind::Decode, std::move(message)); }

}  // namespace flotilla::kube
