#include "planner/profile_io.h"

#include <nlohmann/json.hpp>

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
    return Result<GpuProfile>::failure("profile " + p.model + "/" + p.gpu +
                                       " does not parse as {mbs: {tp: {block: [fwd_s, bwd_s, update_s]}}}: " +
                                       e.what());
  }
  return p;
}

Result<ProfileSet> load_profile_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Result<ProfileSet>::failure("profile directory '" + dir + "' does not exist (expected <dir>/<model>/<gpu>/profile.json)");
  }
  ProfileSet set;
  for (const auto& model_dir : fs::directory_iterator(dir)) {
    if (!model_dir.is_directory()) continue;
    for (const auto& gpu_dir : fs::directory_iterator(model_dir.path())) {
      const fs::path file = gpu_dir.path() / "profile.json";
      if (!fs::is_regular_file(file, ec)) continue;
      std::ifstream in(file);
      std::stringstream ss;
      ss << in.rdbuf();
      auto p = parse_profile_json(ss.str(), model_dir.path().filename().string(), gpu_dir.path().filename().string());
      if (!p) return Result<ProfileSet>::failure(file.string() + ": " + p.error());
      set.add(std::move(p.value()));
    }
  }
  return set;
}

}  // namespace flotilla::planner
