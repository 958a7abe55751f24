#include "planner/measured_runs_io.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "planner/sailor_plan.h"

namespace flotilla::planner {
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string cell; std::getline(ss, cell, ',');) {
    if (!cell.empty() && cell.back() == '\r') cell.pop_back();  // CRLF files
    cells.push_back(cell);
  }
  return cells;
}

// Largest value of `column` over all rows of all CSVs in `dir` whose name starts with `prefix`.
double max_column(const fs::path& dir, const std::string& prefix, const std::string& column) {
  double worst = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::ifstream in(e.path());
    std::string line;
    if (!std::getline(in, line)) continue;
    const auto header = split_csv(line);
    const auto it = std::find(header.begin(), header.end(), column);
    if (it == header.end()) continue;
    const auto col = static_cast<std::size_t>(it - header.begin());
    while (std::getline(in, line)) {
      const auto cells = split_csv(line);
      if (cells.size() > col && !cells[col].empty()) worst = std::max(worst, std::stod(cells[col]));
    }
  }
  return worst;
}

}  // namespace

std::vector<SailorRun> read_sailor_plan_group(const fs::path& dir, const ModelSpec& model) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().filename().string().rfind("plan_config", 0) == 0)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<SailorRun> out;
  for (const fs::path& f : files) {
    SailorRun run;
    run.name = fs::relative(f, dir).string();
    auto parsed = parse_sailor_plan(slurp(f), model.num_blocks());
    if (!parsed.ok()) {
      run.refused_because = parsed.error();
    } else {
      run.plan = parsed->plan;
      run.measured_max_mem_bytes = static_cast<double>(parsed->measured_max_mem_bytes.value_or(0));
      run.measured_iter_seconds = parsed->measured_iter_seconds.value_or(0);
    }
    out.push_back(std::move(run));
  }
  return out;
}

std::vector<MegatronRun> read_megatron_runs(const fs::path& root, const ModelSpec& model) {
  std::vector<MegatronRun> out;
  const fs::path cfgs = root / "configs";
  const fs::path mem_csv = root / "runtime/OPT-350/memory/csv";
  const fs::path time_csv = root / "runtime/OPT-350/time/csv";
  if (!fs::is_directory(cfgs) || !fs::is_directory(mem_csv)) return out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(cfgs)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const int L = model.num_layers;
  const int K = kOpsPerLayer;
  for (const fs::path& file : files) {
    MegatronRun run;
    run.name = file.stem().string();  // OPT-350_<nodes>-<gbs>-<dp>-<pp>-<mbs>
    int nodes = 0, gbs = 0, dp = 0, pp = 0, mbs = 0;
    if (std::sscanf(run.name.c_str(), "OPT-350_%d-%d-%d-%d-%d", &nodes, &gbs, &dp, &pp, &mbs) != 5) continue;
    const auto cfg = nlohmann::json::parse(slurp(file));
    const auto ops = cfg["num_ops_in_each_stage"].get<std::vector<int>>();
    // Aceso's op order: op 0 embedding, layer i = ops 1+13i..13+13i (score op 1+13i+2), then the
    // final norm and the head. Time is layer-granular: a split layer goes to the stage that holds
    // its attention-score ops.
    std::vector<int> bounds{0};
    std::vector<int> op_starts{0};
    int acc = 0;
    for (int s = 0; s + 1 < pp; ++s) {
      acc += ops[static_cast<std::size_t>(s)];
      op_starts.push_back(acc);
      bounds.push_back(std::clamp(1 + (acc - 3 + K - 1) / K, bounds.back() + 1, L));
    }
    op_starts.push_back(1 + K * L + 2);
    bounds.push_back(L + 2);
    // Framework options of these runs: Aceso's runtime keeps every op's output and runs its
    // softmax op in fp32, unfused (docs/planner.md, "megatron-runs").
    run.plan.options.op_level_activations = true;
    run.plan.options.fused_softmax = false;
    run.plan.micro_batch_size = mbs;
    run.plan.global_batch_size = gbs;
    for (int s = 0; s < pp; ++s)
      run.plan.stages.push_back(
          {bounds[static_cast<std::size_t>(s)], bounds[static_cast<std::size_t>(s) + 1], 4,
           std::vector<Replica>(static_cast<std::size_t>(dp), Replica{"GH-96", "us-central1-a", 4})});
    const int m = gbs / (dp * mbs);
    for (int s = 0; s < pp; ++s) {
      const int op_begin = op_starts[static_cast<std::size_t>(s)];
      const int op_end = op_starts[static_cast<std::size_t>(s) + 1];
      MegatronStage stage;
      stage.shape = StageShape{0, 0, 4, dp, mbs, in_flight_micro_batches(s, pp, m), run.plan.options};
      if (op_begin > 0) {
        stage.shape.first_block = 1 + (op_begin - 1 + K - 1) / K;
        stage.shape.tail_ops_of_previous_layer = (op_begin - 1) % K == 0 ? 0 : K - (op_begin - 1) % K;
      }
      if (s + 1 == pp) {
        stage.shape.last_block = L + 2;
      } else {
        stage.shape.last_block = 1 + (op_end - 1) / K;
        stage.shape.head_ops_of_next_layer = (op_end - 1) % K;
      }
      const std::string prefix = run.name + "_stage" + std::to_string(s) + "_rank";
      stage.max_allocated_bytes = max_column(mem_csv, prefix, "max_allocated") * 1048576.0;  // MiB
      stage.max_reserved_bytes = max_column(mem_csv, prefix, "max_reserved") * 1048576.0;
      run.stages.push_back(stage);
    }
    if (fs::is_directory(time_csv))
      run.measured_iter_seconds = max_column(time_csv, run.name + "_stage", "time") / 1000;
    out.push_back(std::move(run));
  }
  return out;
}

}  // namespace flotilla::planner
