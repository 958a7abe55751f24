// A value or one line saying why there is none.
//
// Guarantees: exactly one of value/error is meaningful; ok() tells which. error() is one
//   human-readable line (what is wrong and, where known, what to change).
// Assumes: C++20 (no std::expected); T is movable.
// Caveats: deliberately minimal; richer typed errors (Infeasibility) live beside the models.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace flotilla::planner {

template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  static Result failure(std::string error) {
    Result r;
    r.error_ = std::move(error);
    return r;
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  const std::string& error() const { return error_; }

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
};

}  // namespace flotilla::planner
