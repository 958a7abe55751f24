#pragma once
// kube::Error — what went wrong with a call to the API server, as a value.
//
// Contract: every failed call in flotilla::kube yields an Error whose `kind` is decided from the
// HTTP status code and the Status body's `reason` (as client-go's k8s.io/apimachinery/pkg/api/errors
// does), or from the transport failure (connection refused/reset, timeout → Transient).
// `transient()` says whether retrying the same request later can succeed (5xx, 429, transport).
// Caveat: a 409 is Conflict unless the Status reason says AlreadyExists; a 422 is Invalid and
// carries the server's causes (field path + message).
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace flotilla::kube {

enum class ErrorKind {
  BadRequest,     // 400: malformed request
  Unauthorized,   // 401: missing or bad credentials
  Forbidden,      // 403
  NotFound,       // 404
  MethodNotAllowed,  // 405
  AlreadyExists,  // 409 with reason AlreadyExists
  Conflict,       // 409: stale resourceVersion (optimistic concurrency)
  Gone,           // 410: resourceVersion too old (watch/list must re-list)
  Invalid,        // 422: failed validation; see causes
  Transient,      // 5xx, 429, connection refused/reset, timeouts: retry later
  Config,         // bad kubeconfig / in-cluster environment
  Decode,         // the server answered something that is not what the API promises
  Other,          // anything else (unexpected status code)
};

std::string_view to_string(ErrorKind kind);

struct StatusCause {
  std::string reason;   // e.g. FieldValueRequired
  std::string message;
  std::string field;    // e.g. spec.replicas
};

struct Error {
  ErrorKind kind = ErrorKind::Other;
  int http_status = 0;             // 0 for transport and client-side errors
  std::string reason;              // Status.reason, e.g. "NotFound"
  std::string message;             // Status.message or the transport error
  std::vector<StatusCause> causes; // Status.details.causes (Invalid mostly)
  std::optional<std::chrono::seconds> retry_after;  // Status.details.retryAfterSeconds / header

  bool transient() const { return kind == ErrorKind::Transient; }
  // The server has not reached the resourceVersion asked for (504 with cause
  // ResourceVersionTooLarge, e.g. a watch resumed against a server whose data was reset): like
  // Gone, only a fresh list helps (client-go re-lists from "" on it).
  bool resource_version_too_large() const;
  bool is(ErrorKind k) const { return kind == k; }
  // One line: "NotFound (404): pods \"x\" not found [spec.a: Required value]".
  std::string describe() const;
};

// Builds an Error from an HTTP status and its body (a metav1.Status when the server is a
// Kubernetes API server; anything else is kept as the message).
Error error_from_response(int http_status, std::string_view body);
Error transport_error(std::string message);
Error config_error(std::string message);
Error decode_error(std::string message);

class ApiException : public std::runtime_error {
 public:
  explicit ApiException(Error e) : std::runtime_error(e.describe()), error_(std::move(e)) {}
  const Error& error() const { return error_; }
 private:
  Error error_;
};

// Result<T>: a T or an Error. `value()` throws ApiException when it holds an Error, for callers
// that prefer exceptions; everything else is checked with `ok()` / `error()`.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  bool is(ErrorKind k) const { return !ok() && error().kind == k; }
 private:
  void check() const { if (!ok()) throw ApiException(std::get<1>(v_)); }
  std::variant<T, Error> v_;
};

template <>
class Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  void value() const { if (error_) throw ApiException(*error_); }
  const Error& error() const { return *error_; }
  bool is(ErrorKind k) const { return !ok() && error_->kind == k; }
 private:
  std::optional<Error> error_;
};

}  // namespace flotilla::kube
