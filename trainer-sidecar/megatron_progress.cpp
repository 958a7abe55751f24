#include "trainer-sidecar/megatron_progress.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string>

#include "common/trim.h"

namespace flotilla::sidecar {
namespace {

std::optional<std::int64_t> integer(std::string_view s) {
  s = trim(s);
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// "%.1f" / "%.6E" text; strtod because from_chars for double is not in every libstdc++ we build with.
std::optional<double> real(std::string_view s) {
  const std::string text(trim(s));
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// " iteration       12/     100" -> (12, 100).
bool read_iteration(std::string_view field, MegatronLogLine& out) {
  constexpr std::string_view kKey = " iteration ";
  const std::size_t at = field.rfind(kKey);
  if (at == std::string_view::npos) return false;
  const std::string_view counts = field.substr(at + kKey.size());
  const std::size_t slash = counts.find('/');
  if (slash == std::string_view::npos) return false;
  const auto done = integer(counts.substr(0, slash)), total = integer(counts.substr(slash + 1));
  if (!done || !total) return false;
  out.iteration = *done;
  out.train_iters = *total;
  return true;
}

void read_field(std::string_view field, MegatronLogLine& out) {
  const std::size_t colon = field.rfind(':');
  if (colon == std::string_view::npos) return;
  const std::string_view key = trim(field.substr(0, colon)), value = field.substr(colon + 1);
  if (key == "consumed samples")
    out.consumed_samples = integer(value).value_or(0);
  else if (key == "elapsed time per iteration (ms)")
    out.iteration_ms = real(value).value_or(0);
  else if (key == "global batch size")
    out.global_batch_size = static_cast<int>(integer(value).value_or(0));
  else if (key == "lm loss")
    out.lm_loss = real(value);
}

}  // namespace

std::optional<MegatronLogLine> parse_megatron_log_line(std::string_view line) {
  const std::size_t bar = line.find(" |");
  if (bar == std::string_view::npos) return std::nullopt;
  MegatronLogLine out;
  if (!read_iteration(line.substr(0, bar), out)) return std::nullopt;
  std::string_view rest = line.substr(bar + 2);
  while (!rest.empty()) {
    const std::size_t next = rest.find(" |");
    read_field(rest.substr(0, next), out);
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + 2);
  }
  if (out.iteration_ms <= 0 || out.global_batch_size <= 0) return std::nullopt;
  return out;
}

double megatron_tokens_per_second(const MegatronLogLine& line, int seq_length) {
  if (line.iteration_ms <= 0 || seq_length <= 0) return 0;
  return static_cast<double>(line.global_batch_size) * seq_length / (line.iteration_ms / 1000.0);
}

std::optional<std::int64_t> parse_megatron_tracker(std::string_view text) {
  const auto v = integer(text);
  if (!v || *v < 0) return std::nullopt;
  return v;
}

}  // namespace flotilla::sidecar
