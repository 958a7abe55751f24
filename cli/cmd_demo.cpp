// `flotilla demo`: the whole loop on the embedded local cluster with emulated heterogeneous GPUs
// (cli/demo_scenario.h), watched live (cli/demo_live_view.h) or headless, checked at the end
// (cli/demo_report.h: exit 1 when a check fails) and drawn (cli/demo_plot.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/demo_live_view.h"
#include "cli/demo_observer.h"
#include "cli/demo_plot.h"
#include "cli/demo_report.h"
#include "cli/demo_scenario.h"
#include "cli/local_cluster.h"
#include "common/text_file.h"
#include "kube/client.h"
#include "kube/config.h"

namespace {

namespace fs = std::filesystem;
using namespace flotilla::cli;

int demo_usage(const std::string& why) {
  std::fprintf(stderr,
               "flotilla demo: %s\nusage: flotilla demo [--headless] [--quick] [--dir DIR] [--keep] "
               "[--picture FILE.png] [--examples DIR]\n"
               "  starts a local cluster of emulated fast, slow and small GPUs (examples/demo/nodes.yaml,\n"
               "  examples/local-catalog.yaml), plays the scripted scenario (a node fails, nodes join, a node\n"
               "  joins briefly while jobs arrive often, a higher-priority job preempts), checks the result\n"
               "  and writes a picture. --headless: plain lines instead of the live view; --quick: the\n"
               "  shortened CI scenario; --keep: leave the cluster running (flotilla down --dir DIR/state).\n"
               "  Exit code 0 when every check passed, 1 when one failed, 2 on bad usage.\n",
               why.c_str());
  return 2;
}

// The training text: deterministic, so the reference run reads the same bytes.
void write_training_text(const fs::path& file) {
  std::string text;
  for (int i = 0; text.size() < 60000; ++i)
    text += "the flotilla sails on, ship " + std::to_string(i % 97) + " keeps watch over the fleet.\n";
  std::ofstream(file) << text;
}

int run_demo(const std::vector<std::string>& args) {
  bool headless = false, quick = false, keep = false;
  std::string dir, picture, examples = std::string(FLOTILLA_SOURCE_DIR) + "/examples";
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--headless") headless = true;
    else if (a == "--quick") quick = true;
    else if (a == "--keep") keep = true;
    else if (a == "--dir" && has_value) dir = args[++i];
    else if (a == "--picture" && has_value) picture = args[++i];
    else if (a == "--examples" && has_value) examples = args[++i];
    else if (a == "--help" || a == "-h") return demo_usage("help"), 0;
    else return demo_usage("unknown or incomplete flag '" + a + "'");
  }
  if (!fs::exists(examples + "/demo/elastic.yaml"))
    return demo_usage("no " + examples + "/demo/elastic.yaml: pass --examples with the repository's examples/");
  if (dir.empty()) {
    char tmpl[] = "/tmp/flotilla-demo.XXXXXX";
    if (!::mkdtemp(tmpl)) return demo_usage("cannot create a folder under /tmp");
    dir = tmpl;
  }
  const fs::path work = fs::absolute(dir);
  fs::create_directories(work);
  if (picture.empty()) picture = (work / "demo.png").string();
  write_training_text(work / "data.txt");
  const auto started = std::chrono::steady_clock::now();

  UpOptions up;
  up.nodes_file = examples + "/demo/nodes.yaml";
  up.gpu_catalog = examples + "/local-catalog.yaml";
  up.dir = (work / "state").string();
  // λ over the last 20 s and the restart overhead measured on devcluster (~1-3 s, docs/demo.md):
  // the demo's time scale is minutes, not the production defaults' hours.
  up.arrival_window_s = 20;
  up.restart_overhead_s = 3;
  std::printf("flotilla demo: starting the local cluster in %s (emulated GPUs: %s)\n", up.dir.c_str(),
              up.gpu_catalog.c_str());
  std::fflush(stdout);
  const UpResult cluster = local_up(up);
  if (!cluster.ok) {
    std::fprintf(stderr, "flotilla demo: %s\n", cluster.error.c_str());
    return 1;
  }
  auto config = flotilla::kube::load_kubeconfig(cluster.kubeconfig);
  std::shared_ptr<flotilla::kube::Client> client;
  if (config) {
    auto c = flotilla::kube::Client::create(*config);
    if (c) client = *c;
  }
  if (!client) {
    std::fprintf(stderr, "flotilla demo: cannot talk to the local cluster (%s)\n", cluster.kubeconfig.c_str());
    local_down(up.dir);
    return 1;
  }
  std::printf("  export KUBECONFIG=%s   # to watch with kubectl get tj -w\n", cluster.kubeconfig.c_str());
  DemoObserver observer(client);
  LiveView view(!headless && ::isatty(STDOUT_FILENO), "flotilla demo (emulated GPUs)");
  ScenarioOptions so;
  so.examples_dir = examples + "/demo";
  so.work_dir = work.string();
  so.quick = quick;
  const ScenarioResult scenario = run_scenario(*client, observer, so, [&] { view.render(observer); });
  view.render(observer);

  ReportInputs report;
  report.observer = &observer;
  report.scenario = &scenario;
  report.measured = measure_plans((work / "state/data/pods").string(), "elastic");
  report.elastic_loss_log = flotilla::read_text(work / "ckpt-elastic/loss.log");
  report.reference = run_reference(find_program("flotilla-worker", "worker"), work.string(), scenario.elastic_steps);
  report.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::vector<std::string> failed = print_report(report);
  std::fflush(stdout);
  const std::string plot = write_demo_picture(observer, report.elastic_loss_log, report.reference.loss_log, picture);
  if (plot.empty()) std::printf("picture: %s\n", picture.c_str());
  else std::printf("picture: not written: %s\n", plot.c_str());
  if (keep) {
    std::printf("the cluster keeps running: flotilla down --dir %s\n", up.dir.c_str());
  } else if (std::string e = local_down(up.dir); !e.empty()) {
    std::fprintf(stderr, "flotilla demo: %s\n", e.c_str());
  }
  return failed.empty() ? 0 : 1;
}

const flotilla::cli::CommandRegistrar demo_command{
    {"demo", "the whole loop on a local cluster of emulated GPUs: scripted scenario, live view, checks, picture",
     run_demo}};

}  // namespace
