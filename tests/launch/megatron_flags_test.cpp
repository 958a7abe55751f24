// Every flag the Megatron-LM launcher renders, and its value, checked against Megatron's own
// argument definitions in the source snapshot at $FLOTILLA_MEGATRON_DIR (default
// ../shared/vendor/megatron-lm beside the repository; see its SNAPSHOT.md). The definitions are
// read by tests/launch/megatron_arg_defs.py with Python's ast, without importing Megatron (most
// flags are generated from config dataclasses by Megatron's ArgumentGroupFactory; the script
// applies the same rules). torchrun's flags are checked against a hand-written list.
// Where PyTorch 2.x imports, Megatron's parse_args()/validate_args() run on the rendered flags.
// Each test skips with the reason when the snapshot or python3 is absent.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "launch/megatron.h"
#include "tests/launch/megatron_cases.h"

namespace flotilla::launch {
namespace {

namespace fs = std::filesystem;
namespace fp = flotilla::planner;

// The snapshot root: $FLOTILLA_MEGATRON_DIR, else <source>/../shared/vendor/megatron-lm.
fs::path megatron_dir_configured() {
  if (const char* env = std::getenv("FLOTILLA_MEGATRON_DIR"); env != nullptr && *env != '\0')
    return env;
  return fs::path(FLOTILLA_SOURCE_DIR) / ".." / "shared" / "vendor" / "megatron-lm";
}

std::optional<fs::path> megatron_dir() {
  std::error_code ec;
  const fs::path dir = megatron_dir_configured();
  if (fs::exists(dir / "megatron" / "training" / "arguments.py", ec)) return fs::weakly_canonical(dir, ec);
  return std::nullopt;
}

std::string snapshot_missing() {
  return "Megatron-LM source snapshot not found at " + megatron_dir_configured().string() +
         " (set FLOTILLA_MEGATRON_DIR to the folder holding megatron/training/arguments.py; see "
         "shared/vendor/megatron-lm/SNAPSHOT.md)";
}

struct ProcessRun {
  int exit_code = -1;
  std::string out;
};

ProcessRun run(const std::string& command) {
  ProcessRun r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool have_python3() { return run("python3 --version >/dev/null 2>&1").exit_code == 0; }

// Megatron's flags, read once per process.
const nlohmann::json* megatron_flags(std::string& why_not) {
  static std::optional<nlohmann::json> flags;
  static std::string error;
  static bool loaded = false;
  if (!loaded) {
    loaded = true;
    const auto dir = megatron_dir();
    if (!dir) {
      error = snapshot_missing();
    } else if (!have_python3()) {
      error = "python3 not found: it reads Megatron's argument definitions (tests/launch/megatron_arg_defs.py)";
    } else {
      const ProcessRun r = run("python3 " + std::string(FLOTILLA_SOURCE_DIR) +
                        "/tests/launch/megatron_arg_defs.py " + shell_quote(dir->string()));
      if (r.exit_code != 0) error = "megatron_arg_defs.py failed: " + r.out;
      else flags = nlohmann::json::parse(r.out);
    }
  }
  why_not = error;
  return flags ? &*flags : nullptr;
}

bool is_flag(const std::string& word) { return word.rfind("--", 0) == 0; }

bool is_int(const std::string& v) { return std::regex_match(v, std::regex("-?[0-9]+")); }

bool is_float(const std::string& v) {
  if (v.empty()) return false;
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// One line per problem: unknown flag, a value where none is taken, a missing or mistyped value,
// a value outside the choices.
std::vector<std::string> check_against(const std::vector<std::string>& args, const nlohmann::json& defs) {
  std::vector<std::string> problems;
  std::size_t i = 0;
  while (i < args.size()) {
    const std::string& flag = args[i++];
    if (!is_flag(flag)) {
      problems.push_back("'" + flag + "' is not a flag (a stray value?)");
      continue;
    }
    if (!defs.contains(flag)) {
      problems.push_back(flag + " is not defined by Megatron");
      while (i < args.size() && !is_flag(args[i])) ++i;
      continue;
    }
    const nlohmann::json& d = defs.at(flag);
    const std::string action = d.value("action", "store");
    if (action == "store_true" || action == "store_false" || action == "store_const") {
      if (i < args.size() && !is_flag(args[i]))
        problems.push_back(flag + " is " + action + " but got the value '" + args[i++] + "'");
      continue;
    }
    std::vector<std::string> values;
    const bool many = d["nargs"].is_string() && (d["nargs"] == "*" || d["nargs"] == "+");
    while (i < args.size() && !is_flag(args[i]) && (many || values.empty())) values.push_back(args[i++]);
    if (values.empty()) {
      problems.push_back(flag + " needs a value");
      continue;
    }
    const std::string type = d["type"].is_string() ? d["type"].get<std::string>() : "";
    for (const std::string& v : values) {
      if (type == "int" && !is_int(v)) problems.push_back(flag + " takes an int, got '" + v + "'");
      if (type == "float" && !is_float(v)) problems.push_back(flag + " takes a float, got '" + v + "'");
      if (d["choices"].is_array()) {
        bool found = false;
        for (const auto& c : d["choices"]) found = found || (c.is_string() ? c.get<std::string>() : c.dump()) == v;
        if (!found) problems.push_back(flag + " takes one of " + d["choices"].dump() + ", got '" + v + "'");
      }
    }
  }
  return problems;
}

// torchrun's flags as torch/distributed/run.py (torch 2.x, get_args_parser()) defines them:
// hyphenated names (each also has an underscore alias), with their argparse types; "" = a
// switch that takes no value. torch is not installed on the CPU machines, hence the list.
const std::map<std::string, std::string>& torchrun_flags() {
  static const std::map<std::string, std::string> flags = {
      {"--nnodes", "str"},          {"--nproc-per-node", "str"},  {"--rdzv-backend", "str"},
      {"--rdzv-endpoint", "str"},   {"--rdzv-id", "str"},         {"--rdzv-conf", "str"},
      {"--standalone", ""},         {"--max-restarts", "int"},    {"--monitor-interval", "float"},
      {"--start-method", "str"},    {"--role", "str"},            {"--module", ""},
      {"--no-python", ""},          {"--run-path", ""},           {"--log-dir", "str"},
      {"--redirects", "str"},       {"--tee", "str"},             {"--local-ranks-filter", "str"},
      {"--node-rank", "int"},       {"--master-addr", "str"},     {"--master-port", "int"},
      {"--local-addr", "str"},      {"--logs-specs", "str"}};
  return flags;
}

// Checks the torchrun part of a pod's argv; returns the index of the training script.
std::size_t check_torchrun(const PodLaunch& pod, const MegatronLaunch& launch, const std::string& script) {
  EXPECT_EQ(pod.argv.at(0), "torchrun");
  std::map<std::string, std::string> seen;
  std::size_t i = 1;
  while (i < pod.argv.size() && is_flag(pod.argv[i])) {
    const std::string& flag = pod.argv[i++];
    const auto it = torchrun_flags().find(flag);
    if (it == torchrun_flags().end()) {
      ADD_FAILURE() << flag << " is not a torchrun flag";
      continue;
    }
    if (it->second.empty()) continue;
    if (!(i < pod.argv.size())) {
      ADD_FAILURE() << flag << " needs a value";
      break;
    }
    const std::string& value = pod.argv[i++];
    if (it->second == "int") {
      EXPECT_TRUE(is_int(value)) << flag << " " << value;
    }
    seen[flag] = value;
  }
  EXPECT_EQ(pod.argv.at(i), script);
  // A static rendezvous: every agent knows the world and its own place in it.
  EXPECT_EQ(seen["--rdzv-backend"], "static");
  EXPECT_EQ(seen["--nnodes"], std::to_string(launch.nnodes));
  EXPECT_EQ(seen["--node-rank"], std::to_string(pod.node_rank));
  EXPECT_EQ(seen["--nproc-per-node"], std::to_string(launch.nproc_per_node));
  EXPECT_FALSE(seen["--master-addr"].empty());
  EXPECT_TRUE(is_int(seen["--master-port"]));
  return i;
}

// Megatron's layout grammar (PipelineParallelLayerLayout.parse_str_to_list): commas dropped,
// "x*n" unrolled ("(...)*n" too, which the renderer never writes), stages split on '|'. Returns the stages as strings of E/t/L.
std::vector<std::string> unroll_layout(std::string layout) {
  layout.erase(std::remove(layout.begin(), layout.end(), ','), layout.end());
  EXPECT_EQ(layout.find('('), std::string::npos) << "the renderer writes no (...)*n groups";
  std::string expanded;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    if (i + 1 < layout.size() && layout[i + 1] == '*') {
      std::size_t j = i + 2;
      while (j < layout.size() && std::isdigit(static_cast<unsigned char>(layout[j]))) ++j;
      expanded.append(std::stoul(layout.substr(i + 2, j - i - 2)), layout[i]);
      i = j - 1;
    } else {
      expanded += layout[i];
    }
  }
  std::vector<std::string> stages(1);
  for (char c : expanded) {
    if (c == '|') stages.emplace_back();
    else stages.back() += c;
  }
  return stages;
}

struct Case {
  std::string name;
  MegatronJob job;
  MegatronOptions options;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"homogeneous", testcases::homogeneous_job(), {}});
  MegatronOptions data;
  data.data_path = {"0.7", "/data/a_text_document", "0.3", "/data/b_text_document"};
  data.tokenizer_type = "HuggingFaceTokenizer";
  data.tokenizer_model = "/models/tokenizer";
  data.learning_rate = 1.5e-5;
  out.push_back({"heterogeneous", testcases::heterogeneous_job(), data});
  out.push_back({"tensor-parallel", testcases::tensor_parallel_job(), {}});
  MegatronJob full = testcases::tensor_parallel_job();
  full.training.recompute = fp::Recompute::kFull;
  full.training.precision = fp::Precision::kFp32;
  full.model.head_dim = 96;  // not hidden / heads: --kv-channels
  out.push_back({"full-recompute-fp32", full, {}});
  MegatronJob four = testcases::homogeneous_job();
  four.stages = {testcases::stage(0, 1, 1, 2, "A100-40", {"n0"}),
                 testcases::stage(1, 4, 1, 2, "A100-40", {"n0"}),
                 testcases::stage(4, 8, 1, 2, "V100-16", {"n1"}),
                 testcases::stage(8, 10, 1, 2, "V100-16", {"n1"})};
  four.model.tied_embeddings = false;
  out.push_back({"four-stages-embedding-alone", four, {}});
  return out;
}

TEST(MegatronFlags, EveryRenderedFlagAndValueIsDefinedByMegatron) {
  std::string why;
  const nlohmann::json* defs = megatron_flags(why);
  if (defs == nullptr) GTEST_SKIP() << why;
  for (const Case& c : cases()) {
    auto launch = render_megatron(c.job, c.options);
    ASSERT_TRUE(launch.ok()) << c.name << ": " << launch.error();
    for (const std::string& problem : check_against(launch->megatron_args, *defs))
      ADD_FAILURE() << c.name << ": " << problem;
    for (const PodLaunch& pod : launch->pods) {
      const std::size_t script = check_torchrun(pod, *launch, c.options.script);
      EXPECT_EQ(std::vector<std::string>(pod.argv.begin() + static_cast<long>(script) + 1, pod.argv.end()),
                launch->megatron_args)
          << c.name;
    }
  }
}

TEST(MegatronFlags, RequiredFlagsPresentAndForbiddenOnesAbsent) {
  std::string why;
  const nlohmann::json* defs = megatron_flags(why);
  if (defs == nullptr) GTEST_SKIP() << why;
  // The forbidden flags are real Megatron flags, so their absence means something.
  for (const char* flag : {"--finetune", "--use-checkpoint-args", "--no-ckpt-fully-parallel-save"})
    EXPECT_TRUE(defs->contains(flag)) << flag;
  for (const Case& c : cases()) {
    auto launch = render_megatron(c.job, c.options);
    ASSERT_TRUE(launch.ok()) << c.name << ": " << launch.error();
    const std::vector<std::string>& a = launch->megatron_args;
    const std::set<std::string> present(a.begin(), a.end());
    for (const char* flag : {"--finetune", "--use-checkpoint-args", "--no-ckpt-fully-parallel-save"})
      EXPECT_EQ(present.count(flag), 0u) << c.name << " " << flag;
    for (const char* flag : {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                             "--micro-batch-size", "--global-batch-size", "--use-distributed-optimizer",
                             "--dist-ckpt-optim-fully-reshardable", "--exit-signal-handler", "--save",
                             "--load", "--save-interval", "--num-layers", "--hidden-size",
                             "--num-attention-heads", "--ffn-hidden-size", "--seq-length",
                             "--max-position-embeddings"})
      EXPECT_EQ(present.count(flag), 1u) << c.name << " " << flag;
    const auto ckpt = std::find(a.begin(), a.end(), "--ckpt-format");
    ASSERT_NE(ckpt, a.end());
    EXPECT_EQ(*(ckpt + 1), "torch_dist");
  }
}

// The layout names each stage's planner blocks: E for block 0, one t per layer, L for the head.
TEST(MegatronFlags, LayoutParsesToThePlansStages) {
  for (const Case& c : cases()) {
    auto launch = render_megatron(c.job, c.options);
    ASSERT_TRUE(launch.ok()) << c.name;
    if (launch->layout.empty()) continue;
    const std::vector<std::string> stages = unroll_layout(launch->layout);
    ASSERT_EQ(stages.size(), c.job.stages.size()) << c.name;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      std::string expected;
      for (int b = c.job.stages[s].first_block; b < c.job.stages[s].last_block; ++b)
        expected += b == 0 ? 'E' : b == c.job.model.num_layers + 1 ? 'L' : 't';
      EXPECT_EQ(stages[s], expected) << c.name << " stage " << s;
    }
  }
}

// The checker itself rejects what Megatron's argparse would (so passing means something).
TEST(MegatronFlags, CheckerRejectsBadFlags) {
  std::string why;
  const nlohmann::json* defs = megatron_flags(why);
  if (defs == nullptr) GTEST_SKIP() << why;
  EXPECT_EQ(check_against({"--no-such-flag"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--tensor-model-parallel-size", "two"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--lr", "fast"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--bf16", "1"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--ckpt-format", "zarr"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--save"}, *defs).size(), 1u);
  EXPECT_EQ(check_against({"--normalization", "RMSNorm", "--seq-length", "8"}, *defs).size(), 0u);
}

// With PyTorch 2.x, Megatron itself parses and validates the rendered flags.
TEST(MegatronFlags, MegatronParseAndValidateArgsAcceptTheRenderedFlags) {
  const auto dir = megatron_dir();
  if (!dir) GTEST_SKIP() << snapshot_missing();
  if (!have_python3()) GTEST_SKIP() << "python3 not found";
  const ProcessRun torch = run(
      "python3 -c \"import torch, sys; sys.exit(0 if int(torch.__version__.split('.')[0]) >= 2 else 3)\" 2>&1");
  if (torch.exit_code != 0)
    GTEST_SKIP() << "PyTorch 2.x is not importable here (Megatron-LM's parse_args() and "
                    "validate_args() import it; Debian's python3-torch 1.13 is too old): "
                 << (torch.exit_code == 3 ? std::string("torch < 2") : torch.out.substr(0, 200));
  for (const Case& c : cases()) {
    auto launch = render_megatron(c.job, c.options);
    ASSERT_TRUE(launch.ok()) << c.name;
    std::string command = "python3 " + std::string(FLOTILLA_SOURCE_DIR) + "/tests/launch/megatron_validate.py " +
                          shell_quote(dir->string()) + " " +
                          std::to_string(launch->nnodes * launch->nproc_per_node) + " --";
    for (const std::string& a : launch->megatron_args) command += " " + shell_quote(a);
    const ProcessRun r = run(command + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << c.name << ":\n" << r.out;
  }
}

}  // namespace
}  // namespace flotilla::launch
