#include "trainer-sidecar/torchrun_failure.h"

#include <cctype>
#include <vector>

#include "common/trim.h"

namespace flotilla::sidecar {
namespace {

constexpr std::size_t kMaxLine = 400;

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    out.push_back(trim(text.substr(0, nl)));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// "[rank3]: RuntimeError: x" -> "RuntimeError: x" (torchrun --tee / log prefixes).
std::string_view without_rank_prefix(std::string_view line) {
  if (line.empty() || line.front() != '[') return line;
  const std::size_t close = line.find("]:");
  return close == std::string_view::npos ? line : trim(line.substr(close + 2));
}

// "RuntimeError: ...", "torch.OutOfMemoryError: ...", "AssertionError" + ": ...": a dotted
// identifier ending in Error or Exception, then ": ".
bool is_exception_line(std::string_view line) {
  const std::size_t colon = line.find(": ");
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view name = line.substr(0, colon);
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  const bool ends = (name.size() >= 5 && name.substr(name.size() - 5) == "Error") ||
                    (name.size() >= 9 && name.substr(name.size() - 9) == "Exception");
  return ends && name.find("ChildFailedError") == std::string_view::npos;
}

// The value of "  key : value" in torchrun's failure block, or "".
std::string_view field_value(std::string_view line, std::string_view key) {
  if (line.substr(0, key.size()) != key) return {};
  const std::size_t colon = line.find(':', key.size());
  if (colon == std::string_view::npos || !trim(line.substr(key.size(), colon - key.size())).empty()) return {};
  return trim(line.substr(colon + 1));
}

std::string root_cause(const std::vector<std::string_view>& lines) {
  std::size_t at = 0;
  while (at < lines.size() && lines[at] != "Root Cause (first observed failure):") ++at;
  std::string_view rank, exitcode, traceback;
  for (std::size_t i = at; i < lines.size(); ++i) {
    if (rank.empty()) rank = field_value(lines[i], "rank");
    if (exitcode.empty()) exitcode = field_value(lines[i], "exitcode");
    if (traceback.empty()) traceback = field_value(lines[i], "traceback");
  }
  if (at == lines.size() || rank.empty() || exitcode.empty()) return "";
  std::string out = "rank " + std::string(rank) + " exitcode " + std::string(exitcode);
  if (!traceback.empty() && traceback.rfind("To enable traceback", 0) != 0) out += ": " + std::string(traceback);
  return out;
}

std::string clipped(std::string_view line) { return std::string(line.substr(0, kMaxLine)); }

}  // namespace

std::string torchrun_failure_line(std::string_view log_text) {
  const std::vector<std::string_view> lines = lines_of(log_text);
  for (std::string_view line : lines)
    if (is_exception_line(without_rank_prefix(line))) return clipped(without_rank_prefix(line));
  for (std::string_view line : lines)
    if (without_rank_prefix(line).find(": error: ") != std::string_view::npos)
      return clipped(without_rank_prefix(line));
  return clipped(root_cause(lines));
}

}  // namespace flotilla::sidecar
