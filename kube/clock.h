#pragma once
// kube::Clock — the only source of time for the controller runtime (work queue delays, watcher
// backoff, leader election, event timestamps), so tests can run on virtual time.
//
// Contract:
// - now() is monotonic (steady) time, used for every delay and deadline.
// - wall_now() is calendar time, used only for timestamps written into objects (Event
//   first/lastTimestamp, Lease renewTime).
// - wait_until(lock, cv, deadline) blocks the caller (who holds `lock`, owning `cv`) until cv is
//   notified, the deadline passes on this clock, or a spurious wake-up; callers loop on their
//   own predicate, as with std::condition_variable.
// - sleep_until(deadline, stop) returns true when the deadline passed, false when `stop` fired.
// ManualClock: time moves only through advance()/set(). Waiters on it re-check at least every
// millisecond of real time, so a test's advance() is seen within ~1 ms without lock coupling
// between the clock and the waiter (which would invert lock order).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

namespace flotilla::kube {

class Clock {
 public:
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;
  using wall_time_point = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  virtual wall_time_point wall_now() const = 0;
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          time_point deadline) const = 0;
  virtual bool sleep_until(time_point deadline, std::stop_token stop) const = 0;
  bool sleep_for(duration d, std::stop_token stop) const { return sleep_until(now() + d, stop); }
};

class RealClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  wall_time_point wall_now() const override { return std::chrono::system_clock::now(); }
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  time_point deadline) const override;
  bool sleep_until(time_point deadline, std::stop_token stop) const override;
};

class ManualClock final : public Clock {
 public:
  // Starts at an arbitrary fixed steady origin and wall time 2026-01-01T00:00:00Z.
  ManualClock();
  time_point now() const override;
  wall_time_point wall_now() const override;
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  time_point deadline) const override;
  bool sleep_until(time_point deadline, std::stop_token stop) const override;
  void advance(duration d);

 private:
  mutable std::mutex mu_;
  duration elapsed_{0};
  time_point origin_;
  wall_time_point wall_origin_;
};

// A process-wide real clock for callers that do not inject one.
std::shared_ptr<const Clock> real_clock();

// RFC 3339 timestamps as the API server writes them (metav1.Time / metav1.MicroTime).
std::string format_rfc3339(Clock::wall_time_point t);
std::string format_rfc3339_micro(Clock::wall_time_point t);
// Parses "2026-01-01T00:00:00Z" or with fractional seconds; returns false on bad input.
bool parse_rfc3339(const std::string& text, Clock::wall_time_point& out);
// Seconds since the Unix epoch of an RFC 3339 stamp; nullopt when it does not parse.
std::optional<double> rfc3339_seconds(const std::string& text);
// The stamp `seconds` later, formatted as format_rfc3339(); "" when `text` does not parse.
std::string rfc3339_plus_seconds(const std::string& text, std::int64_t seconds);
// The later of two stamps, as given; one that does not parse ("" included) loses.
std::string later_rfc3339(const std::string& a, const std::string& b);

}  // namespace flotilla::kube
