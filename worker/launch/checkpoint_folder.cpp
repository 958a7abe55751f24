#include "worker/launch/checkpoint_folder.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace flotilla::worker {

std::optional<std::int64_t> parse_step_folder(const std::string& name) {
  if (name.size() != 13 || name.rfind("step_", 0) != 0) return std::nullopt;
  std::int64_t step = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

fs::path step_folder(const fs::path& root, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return root / name;
}

bool is_complete(const fs::path& folder) { return fs::exists(folder / "DONE"); }

std::optional<CheckpointRef> find_latest_complete(const fs::path& root) {
  std::optional<CheckpointRef> best;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return best;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    auto step = parse_step_folder(entry.path().filename().string());
    if (!step || !is_complete(entry.path())) continue;
    if (!best || *step > best->step) best = CheckpointRef{*step, entry.path()};
  }
  return best;
}

std::string read_meta(const fs::path& folder) {
  std::ifstream in(folder / "meta.json", std::ios::binary);
  if (!in)
    throw std::runtime_error("checkpoint '" + folder.string() +
                             "' has DONE but no readable meta.json; delete that folder to fall "
                             "back to the previous checkpoint");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace flotilla::worker
