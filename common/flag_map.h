// Command-line flags as "--name value" pairs, for the programs whose flags are all named (the
// worker's job options, the sidecar): collect them, then take each typed, then refuse leftovers.
//
// Guarantees: collect() refuses a bare word and a flag without a value with one line naming it
//   and the usage; take() leaves `out` untouched when the flag is absent, and refuses a number
//   that does not parse whole ("8x", "", "nan", "inf") naming the flag; unknown() names the first
//   flag nobody took. Pure: no I/O, no environment.
// Assumes: flags start with "--"; with allow_equals, "--name=value" is accepted too.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace flotilla {

template <class T>
bool parse_number(const std::string& s, T& out) {
  if constexpr (std::is_floating_point_v<T>) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v)) return false;
    out = static_cast<T>(v);
    return true;
  } else {
    auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  }
}

class FlagMap {
 public:
  // "" on success, else the line to print. `switches` take no value (e.g. "--version").
  std::string collect(const std::vector<std::string>& args, const std::string& usage, bool allow_equals = false,
                      const std::vector<std::string>& switches = {}) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
        switches_seen_.push_back(a);
        continue;
      }
      if (a.rfind("--", 0) != 0) return "unexpected argument '" + a + "'; usage: " + usage;
      if (allow_equals)
        if (auto eq = a.find('='); eq != std::string::npos) {
          kv_[a.substr(2, eq - 2)] = a.substr(eq + 1);
          continue;
        }
      if (i + 1 >= args.size()) return "flag " + a + " needs a value";
      kv_[a.substr(2)] = args[++i];
    }
    return "";
  }

  bool given(const std::string& name) const { return kv_.count(name) > 0; }
  bool switched(const std::string& flag) const {
    return std::find(switches_seen_.begin(), switches_seen_.end(), flag) != switches_seen_.end();
  }

  template <class T>
  std::string take(const char* name, T& out) {
    auto it = kv_.find(name);
    if (it == kv_.end()) return {};
    const std::string value = it->second;
    kv_.erase(it);
    if constexpr (std::is_same_v<T, std::string>) {
      out = value;
      return {};
    } else {
      if (!parse_number(value, out)) return std::string("--") + name + " '" + value + "' is not a valid number";
      return {};
    }
  }

  // "" when every flag was taken, else "unknown flag --x; usage: ...".
  std::string unknown(const std::string& usage) const {
    return kv_.empty() ? "" : "unknown flag --" + kv_.begin()->first + "; usage: " + usage;
  }

 private:
  std::map<std::string, std::string> kv_;
  std::vector<std::string> switches_seen_;
};

}  // namespace flotilla
