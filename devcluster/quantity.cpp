#include "devcluster/quantity.h"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace flotilla::devcluster {

std::optional<long double> parse_quantity(std::string_view s) {
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  size_t digits_start = i;
  bool dot = false, any_digit = false;
  long double mantissa = 0, scale = 1;
  for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (dot) return std::nullopt;
      dot = true;
      continue;
    }
    any_digit = true;
    if (dot) {
      scale /= 10;
      mantissa += (s[i] - '0') * scale;
    } else {
      mantissa = mantissa * 10 + (s[i] - '0');
    }
  }
  if (i == digits_start || !any_digit) return std::nullopt;
  std::string_view suffix = s.substr(i);
  long double multiplier = 1;
  static const std::pair<const char*, long double> kSuffixes[] = {
      {"", 1},        {"n", 1e-9L},    {"u", 1e-6L},    {"m", 1e-3L},    {"k", 1e3L},     {"M", 1e6L},
      {"G", 1e9L},    {"T", 1e12L},    {"P", 1e15L},    {"E", 1e18L},    {"Ki", 1024.0L}, {"Mi", 1048576.0L},
      {"Gi", 1073741824.0L}, {"Ti", 1099511627776.0L}, {"Pi", 1125899906842624.0L}, {"Ei", 1152921504606846976.0L}};
  bool matched = false;
  for (const auto& [name, m] : kSuffixes)
    if (suffix == name) {
      multiplier = m;
      matched = true;
    }
  if (!matched) {
    // Decimal exponent: e.g. "1e3", "2E-2".
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) return std::nullopt;
    size_t j = 1;
    bool neg_exp = false;
    if (suffix[j] == '+' || suffix[j] == '-') neg_exp = suffix[j++] == '-';
    if (j >= suffix.size()) return std::nullopt;
    long exp = 0;
    for (; j < suffix.size(); ++j) {
      if (suffix[j] < '0' || suffix[j] > '9') return std::nullopt;
      exp = std::min<long>(exp * 10 + (suffix[j] - '0'), 100000);
    }
    multiplier = std::pow(10.0L, static_cast<long double>(neg_exp ? -exp : exp));
  }
  long double v = mantissa * multiplier;
  return negative ? -v : v;
}

std::optional<long double> quantity_value(const nlohmann::json& value) {
  if (value.is_string()) return parse_quantity(value.get_ref<const std::string&>());
  if (value.is_number_integer()) return static_cast<long double>(value.get<long long>());
  if (value.is_number_unsigned()) return static_cast<long double>(value.get<unsigned long long>());
  if (value.is_number_float()) return static_cast<long double>(value.get<double>());
  return std::nullopt;
}

int saturated_count(long double value) {
  if (!(value > 0)) return 0;  // also NaN
  long double up = std::ceil(value);
  return up >= static_cast<long double>(INT_MAX) ? INT_MAX : static_cast<int>(up);
}

}  // namespace flotilla::devcluster
