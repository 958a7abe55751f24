#include "planner/cluster.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>

namespace flotilla::planner {
namespace {

struct ParseError {
  std::string line;
};

std::string where(const std::string& context, const std::string& field) {
  return context + ": '" + field + "'";
}

std::string text_field(const YAML::Node& node, const std::string& field,
                       const std::string& context, const std::string* fallback) {
  const YAML::Node value = node[field];
  if (!value || value.IsNull()) {
    if (fallback != nullptr) return *fallback;
    throw ParseError{context + ": missing '" + field + "'"};
  }
  if (!value.IsScalar() || value.Scalar().empty())
    throw ParseError{where(context, field) + " must be a non-empty string"};
  return value.Scalar();
}

int positive_int(const YAML::Node& node, const std::string& field, const std::string& context,
                 const int* fallback) {
  const YAML::Node value = node[field];
  if (!value || value.IsNull()) {
    if (fallback != nullptr) return *fallback;
    throw ParseError{context + ": missing '" + field + "'"};
  }
  long long parsed = 0;
  bool ok = value.IsScalar();
  if (ok) {
    try {
      parsed = value.as<long long>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok || parsed <= 0 || parsed > 1'000'000)
    throw ParseError{where(context, field) + " must be a positive integer, got '" +
                     (value.IsScalar() ? value.Scalar() : std::string("a non-scalar")) + "'"};
  return static_cast<int>(parsed);
}

std::string canonical_gpu(const GpuCatalog& catalog, const std::string& name,
                          const std::string& context) {
  const GpuType* type = catalog.find(name);
  if (type == nullptr) {
    std::string known;
    for (const GpuType& t : catalog.types()) known += (known.empty() ? "" : ", ") + t.name;
    throw ParseError{context + ": unknown GPU type '" + name + "' (known: " + known + ")"};
  }
  return type->name;
}

std::map<std::string, int> limit_map(const YAML::Node& limits, const std::string& field,
                                     const GpuCatalog* catalog) {
  std::map<std::string, int> out;
  const YAML::Node map = limits[field];
  if (!map) return out;
  if (!map.IsMap()) throw ParseError{"limits: '" + field + "' must be a map of name: count"};
  for (const auto& entry : map) {
    std::string key = entry.first.as<std::string>();
    if (catalog != nullptr) key = canonical_gpu(*catalog, key, "limits." + field);
    YAML::Node holder;
    holder["v"] = entry.second;
    out[key] = positive_int(holder, "v", "limits." + field + "." + key, nullptr);
  }
  return out;
}

}  // namespace

Result<ClusterSpec> parse_cluster(std::string_view yaml_text, const GpuCatalog& catalog) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return Result<ClusterSpec>::failure("cluster file does not parse: " + e.msg + " (line " +
                                        std::to_string(e.mark.line + 1) + ")");
  }
  if (!root.IsMap())
    return Result<ClusterSpec>::failure(
        "cluster file must be a map with 'nodes:' or 'pools:' (see examples/cluster.yaml)");
  ClusterSpec cluster;
  try {
    static const std::string kDefaultZone = "default";
    std::set<std::string> names;
    // Counts are summed into int pools; far beyond any real cluster, and it keeps them exact.
    constexpr std::int64_t kMaxClusterGpus = 1'000'000;
    std::int64_t total_gpus = 0;
    auto check_total = [&](std::int64_t more, const std::string& context) {
      total_gpus += more;
      if (total_gpus > kMaxClusterGpus)
        throw ParseError{context + ": the cluster would have " + std::to_string(total_gpus) +
                         " GPUs; at most " + std::to_string(kMaxClusterGpus) + " are supported"};
    };
    auto add_node = [&](ClusterNode node, const std::string& context) {
      if (!names.insert(node.name).second)
        throw ParseError{context + ": duplicate node name '" + node.name + "'"};
      cluster.nodes.push_back(std::move(node));
    };
    if (const YAML::Node nodes = root["nodes"]) {
      if (!nodes.IsSequence()) throw ParseError{"'nodes' must be a list"};
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const YAML::Node entry = nodes[i];
        std::string context = "nodes[" + std::to_string(i) + "]";
        if (!entry.IsMap()) throw ParseError{context + " must be a map"};
        ClusterNode node;
        node.name = text_field(entry, "name", context, nullptr);
        context = "node '" + node.name + "'";
        node.gpu_type = canonical_gpu(catalog, text_field(entry, "gpu", context, nullptr), context);
        node.gpus = positive_int(entry, "count", context, nullptr);
        check_total(node.gpus, context);
        node.zone = text_field(entry, "zone", context, &kDefaultZone);
        node.region = text_field(entry, "region", context, &node.zone);
        add_node(std::move(node), context);
      }
    }
    if (const YAML::Node pools = root["pools"]) {
      if (!pools.IsSequence()) throw ParseError{"'pools' must be a list"};
      for (std::size_t i = 0; i < pools.size(); ++i) {
        const YAML::Node entry = pools[i];
        const std::string context = "pools[" + std::to_string(i) + "]";
        if (!entry.IsMap()) throw ParseError{context + " must be a map"};
        const std::string gpu =
            canonical_gpu(catalog, text_field(entry, "gpu", context, nullptr), context);
        const int node_count = positive_int(entry, "nodes", context, nullptr);
        const int catalog_size = catalog.find(gpu)->gpus_per_node;
        const int per_node = positive_int(entry, "gpus_per_node", context, &catalog_size);
        const std::string zone = text_field(entry, "zone", context, &kDefaultZone);
        const std::string region = text_field(entry, "region", context, &zone);
        check_total(static_cast<std::int64_t>(node_count) * per_node, context);
        for (int n = 0; n < node_count; ++n) {
          add_node({gpu + "-" + zone + "-" + std::to_string(n), gpu, per_node, zone, region},
                   context);
        }
      }
    }
    if (cluster.nodes.empty())
      throw ParseError{"cluster file lists no GPUs: add 'nodes:' or 'pools:' entries"};
    if (const YAML::Node limits = root["limits"]) {
      if (!limits.IsMap()) throw ParseError{"'limits' must be a map"};
      cluster.max_gpus_per_type = limit_map(limits, "max_gpus_per_type", &catalog);
      cluster.max_gpus_per_zone = limit_map(limits, "max_gpus_per_zone", nullptr);
    }
  } catch (const ParseError& e) {
    return Result<ClusterSpec>::failure(e.line);
  } catch (const YAML::Exception& e) {
    return Result<ClusterSpec>::failure("cluster file: " + e.msg);
  }
  return cluster;
}

std::vector<GpuPool> gpu_pools(const ClusterSpec& cluster) {
  std::map<std::pair<std::string, std::string>, GpuPool> by_key;
  for (const ClusterNode& node : cluster.nodes) {
    GpuPool& pool = by_key[{node.gpu_type, node.zone}];
    pool.gpu_type = node.gpu_type;
    pool.zone = node.zone;
    pool.region = node.region;
    pool.gpus += node.gpus;
    pool.largest_node_gpus = std::max(pool.largest_node_gpus, node.gpus);
  }
  std::vector<GpuPool> pools;
  for (auto& [key, pool] : by_key) pools.push_back(std::move(pool));
  return pools;
}

std::vector<FreeNode> free_nodes(const ClusterSpec& cluster) {
  std::vector<FreeNode> nodes;
  for (const ClusterNode& node : cluster.nodes)
    nodes.push_back({node.name, node.gpu_type, node.zone, node.gpus});
  return nodes;
}

}  // namespace flotilla::planner
