#include "worker/runtime/gpu_selection.h"

#include <set>

namespace flotilla::worker {

std::vector<std::string> split_gpu_list(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  for (char c : list + ",") {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  return out;
}

namespace {

std::vector<std::string> candidates(const char* flotilla_visible_gpus,
                                    const char* cuda_visible_devices, int device_count) {
  if (flotilla_visible_gpus != nullptr && *flotilla_visible_gpus != '\0')
    return split_gpu_list(flotilla_visible_gpus);
  if (cuda_visible_devices != nullptr && *cuda_visible_devices != '\0')
    return split_gpu_list(cuda_visible_devices);
  std::vector<std::string> all;
  for (int d = 0; d < device_count; ++d) all.push_back(std::to_string(d));
  return all;
}

}  // namespace

std::string gpu_for_local_rank(int local_rank, const char* flotilla_visible_gpus,
                               const char* cuda_visible_devices, int device_count) {
  auto list = candidates(flotilla_visible_gpus, cuda_visible_devices, device_count);
  if (list.empty() || local_rank < 0) return {};
  return list[static_cast<std::size_t>(local_rank) % list.size()];
}

int distinct_gpus(int local_ranks, const char* flotilla_visible_gpus,
                  const char* cuda_visible_devices, int device_count) {
  std::set<std::string> used;
  for (int r = 0; r < local_ranks; ++r) {
    auto g = gpu_for_local_rank(r, flotilla_visible_gpus, cuda_visible_devices, device_count);
    if (!g.empty()) used.insert(g);
  }
  return static_cast<int>(used.size());
}

}  // namespace flotilla::worker
