// `flotilla plan ... --launcher megatron` run as a real process: one launch command per pod of
// the chosen plan, each with both parallel-size flags, and the launcher's options and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::path(FLOTILLA_BINARY_DIR) / "launch_cli_test_tmp" / std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

CliRun flotilla(const std::string& args) {
  static int counter = 0;
  const auto out = scratch() / ("out" + std::to_string(counter) + ".txt");
  const auto err = scratch() / ("err" + std::to_string(counter++) + ".txt");
  const std::string command = std::string(FLOTILLA_BINARY_DIR) + "/cli/flotilla " + args + " >" +
                              out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

std::string example_cluster() { return std::string(FLOTILLA_SOURCE_DIR) + "/examples/cluster.yaml"; }

struct Printed {
  int pods = -1, gpus_per_pod = -1;
  std::vector<std::string> nodes;     // from "# pod R on node N (G GPUs)"
  std::vector<std::string> commands;  // the line after each
};

Printed launch_section(const std::string& out) {
  Printed p;
  std::istringstream in(out);
  std::string line;
  bool in_launch = false;
  const std::regex header(R"(launch \(megatron\): (\d+) pods? x (\d+) GPUs, .*)");
  const std::regex pod(R"(# pod (\d+) on node (\S+) \((\d+) GPUs\))");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, header)) {
      in_launch = true;
      p.pods = std::stoi(m[1]);
      p.gpus_per_pod = std::stoi(m[2]);
    } else if (in_launch && std::regex_match(line, m, pod)) {
      EXPECT_EQ(std::stoi(m[1]), static_cast<int>(p.nodes.size()));
      p.nodes.push_back(m[2]);
      if (std::getline(in, line)) p.commands.push_back(line);
    }
  }
  return p;
}

TEST(LaunchCli, OneMegatronCommandPerPodWithBothParallelSizes) {
  const CliRun run = flotilla("plan --model llama-3-8b --cluster " + example_cluster() + " --launcher megatron");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The usual plan output comes first.
  EXPECT_NE(run.out.find("best plan:"), std::string::npos);
  EXPECT_LT(run.out.find("rejected:"), run.out.find("launch (megatron)"));
  const Printed p = launch_section(run.out);
  ASSERT_GT(p.pods, 0) << run.out;
  ASSERT_EQ(static_cast<int>(p.commands.size()), p.pods);
  for (std::size_t r = 0; r < p.commands.size(); ++r) {
    const std::string& c = p.commands[r];
    EXPECT_NE(c.find("torchrun --nnodes " + std::to_string(p.pods) + " --node-rank " + std::to_string(r) +
                     " --nproc-per-node " + std::to_string(p.gpus_per_pod) + " "),
              std::string::npos)
        << c;
    EXPECT_NE(c.find(" --tensor-model-parallel-size "), std::string::npos) << c;
    EXPECT_NE(c.find(" --pipeline-model-parallel-size "), std::string::npos) << c;
  }
}

TEST(LaunchCli, JsonPodsCoverThePlacement) {
  const CliRun run =
      flotilla("plan --model gpt-neo-2.7b --cluster " + example_cluster() + " --launcher megatron --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto out = nlohmann::json::parse(run.out);
  const auto& launch = out.at("launch");
  EXPECT_EQ(launch.at("pods").size(), launch.at("nnodes").get<std::size_t>());
  std::map<std::string, int> gpus;
  for (const auto& pod : launch.at("pods")) {
    gpus[pod.at("node").get<std::string>()] += pod.at("gpus").get<int>();
    const std::string command = pod.at("command");
    EXPECT_NE(command.find("--tensor-model-parallel-size " + std::to_string(launch.at("tp").get<int>())),
              std::string::npos);
    EXPECT_NE(command.find("--pipeline-model-parallel-size " + std::to_string(launch.at("pp").get<int>())),
              std::string::npos);
  }
  EXPECT_EQ(gpus, out.at("placement").get<decltype(gpus)>());
  EXPECT_EQ(launch.at("tp").get<int>() * launch.at("pp").get<int>() * launch.at("dp").get<int>(),
            out.at("plan").at("num_gpus").get<int>());
}

TEST(LaunchCli, OptionsReachTheCommand) {
  const CliRun run = flotilla("plan --model llama-3-8b --cluster " + example_cluster() +
                              " --launcher megatron --megatron-master-addr job-0.flotilla "
                              "--megatron-master-port 7000 --checkpoint-path /ckpt/llama "
                              "--data-path /data/a_text_document --train-steps 50 --save-interval 10 "
                              "--megatron-script /megatron/pretrain_gpt.py");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Printed p = launch_section(run.out);
  ASSERT_FALSE(p.commands.empty());
  for (const std::string& c : p.commands) {
    EXPECT_NE(c.find("--master-addr job-0.flotilla --master-port 7000 /megatron/pretrain_gpt.py "), std::string::npos) << c;
    EXPECT_NE(c.find("--train-iters 50 "), std::string::npos) << c;
    EXPECT_NE(c.find("--data-path /data/a_text_document "), std::string::npos) << c;
    EXPECT_EQ(c.find("--mock-data"), std::string::npos) << c;
    EXPECT_NE(c.find("--save /ckpt/llama --load /ckpt/llama --save-interval 10 "), std::string::npos) << c;
  }
}

TEST(LaunchCli, ErrorsAreOneLine) {
  CliRun run = flotilla("plan --model llama-3-8b --cluster " + example_cluster() + " --launcher deepspeed");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "flotilla plan: --launcher must be 'megatron', got 'deepspeed'\n");
  run = flotilla("plan --model llama-3-8b --cluster " + example_cluster() + " --launcher megatron --zero 3");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "flotilla plan: --launcher megatron runs Megatron's distributed optimizer (ZeRO-1): use --zero 0 or 1\n");
  run = flotilla("plan --model llama-3-8b --cluster " + example_cluster() + " --launcher megatron --megatron-master-port 70000");
  EXPECT_EQ(run.exit_code, 2);
  // OPT-350M's 512->1024 embedding projection has no Megatron flag: the plan, then one line.
  run = flotilla("plan --model opt-350m --cluster " + example_cluster() + " --launcher megatron");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("best plan:"), std::string::npos);
  EXPECT_EQ(run.err,
            "flotilla plan: cannot launch with megatron: OPT-350M projects 512-wide embeddings to the "
            "hidden size (OPT); Megatron-LM has no flag for that projection\n");
}

TEST(LaunchCli, HelpNamesTheLauncherOptions) {
  const CliRun run = flotilla("plan --help");
  EXPECT_EQ(run.exit_code, 0);
  for (const char* flag : {"--launcher megatron", "--megatron-master-addr", "--megatron-master-port",
                           "--checkpoint-path", "--data-path", "--train-steps", "--save-interval"})
    EXPECT_NE(run.out.find(flag), std::string::npos) << flag;
}

}  // namespace
