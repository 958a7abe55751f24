#include "worker/runtime/layout.h"

#include <charconv>
#include <sstream>

namespace flotilla::worker {

int Layout::stage_of_unit(int unit) const {
  for (int s = 0; s < pp; ++s)
    if (unit >= stage_units[static_cast<std::size_t>(s)].first &&
        unit < stage_units[static_cast<std::size_t>(s)].second)
      return s;
  return -1;
}

std::string Layout::partition_string() const {
  std::string out;
  for (const auto& [a, b] : stage_units) {
    if (!out.empty()) out += ',';
    out += std::to_string(a) + ":" + std::to_string(b);
  }
  return out;
}

std::variant<Layout, std::string> make_layout(int world_size, int pp, int dp, int num_units,
                                              const std::string& partition,
                                              const BatchGeometry& geometry) {
  if (pp < 1 || dp < 1) return std::string("--pp and --dp must be at least 1");
  if (world_size != pp * dp)
    return "--world-size " + std::to_string(world_size) + " is not --pp x --dp = " +
           std::to_string(pp) + " x " + std::to_string(dp);
  if (pp > num_units)
    return "--pp " + std::to_string(pp) + " exceeds the model's " + std::to_string(num_units) +
           " units (embedding + layers + head); use at most " + std::to_string(num_units) +
           " stages";
  if (std::string e = geometry.validate(); !e.empty()) return e;
  if (geometry.virtual_shards % dp != 0)
    return "--dp " + std::to_string(dp) + " does not divide --virtual-shards " +
           std::to_string(geometry.virtual_shards) +
           "; a physical DP degree must divide the number of virtual shards";
  if (geometry.global_batch % (dp * geometry.micro_batch) != 0)
    return "global batch " + std::to_string(geometry.global_batch) +
           " is not divisible by DP x micro-batch = " + std::to_string(dp * geometry.micro_batch);
  Layout layout;
  layout.pp = pp;
  layout.dp = dp;
  if (partition.empty()) {
    int begin = 0;
    for (int s = 0; s < pp; ++s) {
      int count = num_units / pp + (s < num_units % pp ? 1 : 0);
      layout.stage_units.emplace_back(begin, begin + count);
      begin += count;
    }
    return layout;
  }
  std::stringstream ss(partition);
  std::string item;
  int expect = 0;
  while (std::getline(ss, item, ',')) {
    auto colon = item.find(':');
    int a = -1, b = -1;
    bool ok = colon != std::string::npos;
    if (ok) {
      auto r1 = std::from_chars(item.data(), item.data() + colon, a);
      auto r2 = std::from_chars(item.data() + colon + 1, item.data() + item.size(), b);
      ok = r1.ec == std::errc() && r1.ptr == item.data() + colon && r2.ec == std::errc() &&
           r2.ptr == item.data() + item.size();
    }
    if (!ok)
      return "--partition item '" + item + "' is not first:end (e.g. --partition 0:3,3:5)";
    if (a != expect || b <= a)
      return "--partition '" + partition + "' must list contiguous non-empty unit ranges from 0; "
             "stage " + std::to_string(layout.stage_units.size()) + " should start at unit " +
             std::to_string(expect);
    layout.stage_units.emplace_back(a, b);
    expect = b;
  }
  if (expect != num_units)
    return "--partition '" + partition + "' covers units 0.." + std::to_string(expect) +
           " but the model has " + std::to_string(num_units) + " units";
  if (static_cast<int>(layout.stage_units.size()) != pp)
    return "--partition '" + partition + "' has " + std::to_string(layout.stage_units.size()) +
           " stages but --pp is " + std::to_string(pp);
  return layout;
}

}  // namespace flotilla::worker
