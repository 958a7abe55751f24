#include "common/data_path.h"

#include <cstdlib>

namespace flotilla {

namespace {
std::filesystem::path configured_root() {
  if (const char* env = std::getenv("FLOTILLA_DATA"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  return std::filesystem::path(FLOTILLA_DEFAULT_DATA_DIR);
}
}  // namespace

std::optional<std::filesystem::path> data_dir() {
  std::error_code ec;
  auto root = configured_root();
  if (std::filesystem::is_directory(root, ec)) return std::filesystem::weakly_canonical(root, ec);
  return std::nullopt;
}

std::optional<std::filesystem::path> data_path(const std::string& relative) {
  auto root = data_dir();
  if (!root) return std::nullopt;
  std::error_code ec;
  auto p = *root / relative;
  if (std::filesystem::exists(p, ec)) return p;
  return std::nullopt;
}

std::string data_missing_message(const std::string& relative) {
  return "measured data not found: " + (configured_root() / relative).string() +
         " (set FLOTILLA_DATA to the shared/data folder itself, the one with sailor/ and traces/ in it;"
         " see shared/data/README.md)";
}

}  // namespace flotilla
