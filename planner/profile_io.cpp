#include "planner/profile_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace flotilla::planner {

Result<GpuProfile> parse_profile_json(std::string_view text, std::string model, std::string gpu) {
  GpuProfile p;
  p.model = std::move(model);
  p.gpu = std::move(gpu);
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    for (const auto& [mbs_s, by_tp] : j.items()) {
      const int mbs = std::stoi(mbs_s);
      for (const auto& [tp_s, blocks] : by_tp.items()) {
        const int tp = std::stoi(tp_s);
        std::vector<LayerTimes> times(blocks.size());
        for (const auto& [b_s, v] : blocks.items()) {
          const std::size_t b = static_cast<std::size_t>(std::stoi(b_s));
          if (b >= times.size() || !v.is_array() || v.size() < 3) {
            return Result<GpuProfile>::failure("profile " + p.model + "/" + p.gpu + ": block " + b_s +
                                               " must be [fwd_s, bwd_s, update_s] with blocks 0..n-1");
          }
          times[b] = {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
          if (times[b].forward_s < 0 || times[b].backward_s < 0 || times[b].update_s < 0) {
            return Result<GpuProfile>::failure("profile " + p.model + "/" + p.gpu + ": negative time");
          }
        }
        p.by_mbs_tp[mbs][tp] = std::move(times);
      }
    }
  } catch (const std::exception& e) {
    return Result<GpuProfile>::failure(
        "profile " + p.model + "/" + p.gpu +
        " does not parse as {mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}: " + e.what());
  }
  return p;
}

namespace {

namespace fs = std::filesystem;

bool is_documentation(const fs::path& entry) {
  const std::string name = entry.filename().string();
  return name.empty() || name.front() == '.' || name.rfind("README", 0) == 0;
}

// Sub-folders of `dir`, sorted; "" and fills `out`, or one line naming the path and the fix.
std::string list_folders(const fs::path& dir, const char* expected, std::vector<fs::path>& out) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec)
    return "cannot read profile folder '" + dir.string() + "': " + ec.message() +
           "; make it readable (chmod a+rx) or pass another --profiles";
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path path = it->path();
    if (is_documentation(path)) continue;
    std::error_code kind_ec;
    if (!fs::is_directory(path, kind_ec)) {
      return "'" + path.string() + "' is not a folder; the profile folder must hold only " + expected +
             " folders (<dir>/<model>/<gpu>/profile.json): move it out";
    }
    out.push_back(path);
  }
  if (ec)
    return "cannot read profile folder '" + dir.string() + "': " + ec.message() +
           "; make it readable (chmod a+rx) or pass another --profiles";
  std::sort(out.begin(), out.end());
  return "";
}

}  // namespace

Result<ProfileSet> load_profile_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return Result<ProfileSet>::failure("profile directory '" + dir +
                                       "' does not exist (expected <dir>/<model>/<gpu>/profile.json)");
  }
  if (!fs::is_directory(dir, ec)) {
    return Result<ProfileSet>::failure("profile directory '" + dir +
                                       "' is a file, not a folder; pass the folder that holds "
                                       "<model>/<gpu>/profile.json");
  }
  ProfileSet set;
  std::vector<fs::path> models;
  if (std::string why = list_folders(dir, "<model>", models); !why.empty()) return Result<ProfileSet>::failure(why);
  for (const fs::path& model_dir : models) {
    std::vector<fs::path> gpus;
    if (std::string why = list_folders(model_dir, "<gpu>", gpus); !why.empty()) return Result<ProfileSet>::failure(why);
    for (const fs::path& gpu_dir : gpus) {
      const fs::path file = gpu_dir / "profile.json";
      const fs::file_status status = fs::status(file, ec);
      if (status.type() == fs::file_type::not_found) {
        std::error_code link_ec;
        if (fs::is_symlink(file, link_ec))
          return Result<ProfileSet>::failure("'" + file.string() +
                                             "' is a broken symbolic link; point it at the "
                                             "profile or remove it");
        continue;  // a GPU folder without a profile
      }
      if (ec && status.type() != fs::file_type::not_found)
        return Result<ProfileSet>::failure("cannot read '" + file.string() + "': " + ec.message() +
                                           "; make it readable or remove its folder");
      if (status.type() != fs::file_type::regular)
        return Result<ProfileSet>::failure("'" + file.string() +
                                           "' is not a regular file; it must be the JSON profile "
                                           "{mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}");
      std::ifstream in(file);
      std::stringstream ss;
      if (in) ss << in.rdbuf();
      if (!in || in.bad())
        return Result<ProfileSet>::failure("cannot read '" + file.string() +
                                           "': " + std::error_code(errno, std::generic_category()).message() +
                                           "; make it readable or remove its folder");
      auto p = parse_profile_json(ss.str(), model_dir.filename().string(), gpu_dir.filename().string());
      if (!p) return Result<ProfileSet>::failure(file.string() + ": " + p.error());
      if (auto preset = find_preset(p->model)) {
        fold_separate_final_norm(p.value(), *preset);
        const std::string mismatch = profile_block_mismatch(*p, *preset);
        if (!mismatch.empty()) return Result<ProfileSet>::failure(file.string() + ": " + mismatch);
      }
      set.add(std::move(p.value()));
    }
  }
  return set;
}

}  // namespace flotilla::planner
