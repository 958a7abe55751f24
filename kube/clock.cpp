#include "kube/clock.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>

namespace flotilla::kube {

void RealClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                           time_point deadline) const {
  cv.wait_until(lock, deadline);
}

bool RealClock::sleep_until(time_point deadline, std::stop_token stop) const {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return !cv.wait_until(lock, stop, deadline, [] { return false; }) && !stop.stop_requested();
}

ManualClock::ManualClock()
    : origin_(time_point{} + std::chrono::hours(1000)),
      wall_origin_(std::chrono::sys_days{std::chrono::year{2026} / 1 / 1}) {}

Clock::time_point ManualClock::now() const {
  std::lock_guard lock(mu_);
  return origin_ + elapsed_;
}

Clock::wall_time_point ManualClock::wall_now() const {
  std::lock_guard lock(mu_);
  return wall_origin_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(elapsed_);
}

void ManualClock::advance(duration d) {
  std::lock_guard lock(mu_);
  elapsed_ += d;
}

void ManualClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                             time_point deadline) const {
  if (now() >= deadline) return;
  cv.wait_for(lock, std::chrono::milliseconds(1));
}

bool ManualClock::sleep_until(time_point deadline, std::stop_token stop) const {
  while (now() < deadline) {
    if (stop.stop_requested()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return !stop.stop_requested();
}

std::shared_ptr<const Clock> real_clock() {
  static const auto clock = std::make_shared<const RealClock>();
  return clock;
}

static std::string format(Clock::wall_time_point t, bool micro) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  if (secs > t) secs -= std::chrono::seconds(1);
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (micro) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
    char frac[32];
    std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(us));
    out += frac;
  }
  return out + "Z";
}

std::string format_rfc3339(Clock::wall_time_point t) { return format(t, false); }
std::string format_rfc3339_micro(Clock::wall_time_point t) { return format(t, true); }

bool parse_rfc3339(const std::string& text, Clock::wall_time_point& out) {
  int y, mo, d, h, mi, s;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &s) != 6)
    return false;
  size_t pos = 19;
  long long frac_us = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    long long scale = 100000;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (scale > 0) frac_us += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
  }
  long offset_s = 0;
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int oh = 0, om = 0;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &oh, &om) != 2) return false;
    offset_s = (oh * 3600 + om * 60) * (text[pos] == '+' ? 1 : -1);
  } else if (pos >= text.size() || (text[pos] != 'Z' && text[pos] != 'z')) {
    return false;
  }
  using namespace std::chrono;
  auto date = sys_days{year{y} / month{static_cast<unsigned>(mo)} / day{static_cast<unsigned>(d)}};
  out = time_point_cast<system_clock::duration>(date + hours{h} + minutes{mi} + seconds{s} +
                                                microseconds{frac_us} - seconds{offset_s});
  return true;
}

std::optional<double> rfc3339_seconds(const std::string& text) {
  Clock::wall_time_point t;
  if (!parse_rfc3339(text, t)) return std::nullopt;
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string rfc3339_plus_seconds(const std::string& text, std::int64_t seconds) {
  Clock::wall_time_point t;
  if (!parse_rfc3339(text, t)) return "";
  return format_rfc3339(t + std::chrono::seconds(seconds));
}

std::string later_rfc3339(const std::string& a, const std::string& b) {
  const std::optional<double> a_s = rfc3339_seconds(a), b_s = rfc3339_seconds(b);
  if (!b_s) return a;
  return !a_s || *b_s > *a_s ? b : a;
}

}  // namespace flotilla::kube
