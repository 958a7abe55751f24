// Test harness for the trainer sidecar: a real flotilla-devcluster, real flotilla-sidecar pods
// running real flotilla-worker ranks, and the test playing the operator (creating pods with a
// plan annotation, patching epochs and barriers, reading reports) through kube::Client and
// kubectl. Reference runs are uninterrupted `flotilla-worker run`s of the same job.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "common/pod_plan.h"
#include "common/text_file.h"
#include "kube/client.h"
#include "kube/config.h"
#include "tests/common/corpus.h"
#include "tests/common/sample_pod_plan.h"
#include "tests/devcluster/devcluster_process.h"

namespace flotilla::sidecar::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;
using devcluster_test::DevclusterProcess;

inline std::string bin(const std::string& rel) { return std::string(FLOTILLA_BINARY_DIR) + "/" + rel; }
inline std::string sidecar_binary() { return bin("trainer-sidecar/flotilla-sidecar"); }
inline std::string worker_binary() { return bin("worker/flotilla-worker"); }

inline std::string slurp(const std::filesystem::path& path) { return flotilla::read_text(path); }

inline int count_lines(const fs::path& p) {
  std::ifstream in(p);
  int n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

// Deterministic text the model can learn from (tests/common/corpus.h, as the worker tests).
inline fs::path write_corpus(const fs::path& dir, std::size_t bytes = 40000) {
  return flotilla::testing::write_corpus(dir, bytes);
}

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(30ms);
  }
  return pred();
}

class SidecarCluster : public ::testing::Test {
 public:
  void SetUp() override {
    name_ = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::path(FLOTILLA_BINARY_DIR) / "tests-tmp" / "sidecar" / name_;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    corpus_ = write_corpus(dir_);
    dc_ = std::make_unique<DevclusterProcess>("sidecar-" + name_);
    ASSERT_TRUE(dc_->start()) << dc_->log();
    auto config = kube::load_kubeconfig(dc_->kubeconfig().string());
    ASSERT_TRUE(config.ok()) << config.error().describe();
    auto client = kube::Client::create(*config);
    ASSERT_TRUE(client.ok());
    client_ = *client;
  }
  void TearDown() override {
    if (HasFailure()) {
      for (const auto& e : fs::directory_iterator(dir_))
        if (e.path().filename().string().rfind("work-", 0) == 0)
          for (const auto& f : fs::directory_iterator(e.path()))
            if (f.path().extension() == ".log")
              std::fprintf(stderr, "--- %s\n%s\n", f.path().c_str(), slurp(f.path()).c_str());
      std::fprintf(stderr, "--- pod logs\n%s\n", dc_->kubectl("logs -l flotilla.io/job=j --tail=40").output.c_str());
    }
    dc_.reset();
  }

  // The job's plan for one pod; epoch 1, barrier lifted.
  PodPlan plan(int pp, std::vector<int> ranks, std::int64_t steps, std::string rendezvous_pod = "p0",
               std::int64_t epoch = 1) const {
    PodPlan p = flotilla::testing::small_pipeline_plan("default/j", pp, epoch, steps, corpus_.string(),
                                                       (dir_ / "ck").string());
    p.seed = 1234;
    p.checkpoint_every_steps = 2;
    p.loss_log = (dir_ / "loss.txt").string();
    p.ranks = std::move(ranks);
    p.rendezvous_pod = std::move(rendezvous_pod);
    return p;
  }

  fs::path work(const std::string& pod) const { return dir_ / ("work-" + pod); }

  void create_pod(const std::string& pod, const PodPlan& p, double rendezvous_timeout_s = 20,
                  Json extra_env = Json::array(), int grace_s = 30,
                  const std::vector<std::string>& extra_args = {}) {
    Json command = {sidecar_binary(), "--kubeconfig", dc_->kubeconfig().string(), "--worker-binary",
                    worker_binary(), "--work-dir", work(pod).string(), "--report-interval-ms", "200",
                    "--rendezvous-timeout-s", std::to_string(rendezvous_timeout_s)};
    for (const auto& a : extra_args) command.push_back(a);
    Json body = {{"apiVersion", "v1"},
                 {"kind", "Pod"},
                 {"metadata",
                  {{"name", pod},
                   {"labels", {{kJobLabel, "j"}}},
                   {"annotations", {{kPlanAnnotation, encode_pod_plan(p)}}}}},
                 {"spec",
                  {{"restartPolicy", "Never"},
                   {"terminationGracePeriodSeconds", grace_s},
                   {"containers",
                    Json::array({{{"name", "sidecar"}, {"image", "flotilla"}, {"command", command},
                                  {"env", extra_env}}})}}}};
    auto r = client_->create(kube::resources::pods, "default", body);
    ASSERT_TRUE(r.ok()) << r.error().describe();
  }

  void patch_plan(const std::string& pod, const PodPlan& p) {
    Json patch = {{"metadata", {{"annotations", {{kPlanAnnotation, encode_pod_plan(p)}}}}}};
    auto r = client_->patch(kube::resources::pods, "default", pod, kube::PatchType::Merge, patch);
    ASSERT_TRUE(r.ok()) << r.error().describe();
  }

  std::optional<PodReport> report(const std::string& pod) {
    auto r = client_->get(kube::resources::pods, "default", pod);
    if (!r.ok()) return std::nullopt;
    const std::string text = r->value("/metadata/annotations"_json_pointer, Json::object())
                                 .value(kReportAnnotation, std::string());
    auto parsed = parse_pod_report(text);
    if (auto* rep = std::get_if<PodReport>(&parsed)) return *rep;
    return std::nullopt;
  }

  bool reports(const std::string& pod, std::int64_t epoch, PodState state, std::chrono::milliseconds limit) {
    return wait_until([&] {
      auto r = report(pod);
      return r && r->epoch == epoch && r->state == state;
    }, limit);
  }

  std::string phase(const std::string& pod) {
    auto r = client_->get(kube::resources::pods, "default", pod);
    return r.ok() ? r->value("/status/phase"_json_pointer, std::string()) : "<gone>";
  }

  // Uninterrupted `flotilla-worker run` of the same job, PP 1; returns its loss log.
  std::string reference_loss(std::int64_t steps) {
    const fs::path ck = dir_ / "ref_ck", loss = dir_ / "ref_loss.txt";
    const std::string cmd = worker_binary() + " run --model small --seed 1234 --global-batch 4 " +
                            "--micro-batch 1 --virtual-shards 1 --pp 1 --data " + corpus_.string() +
                            " --checkpoint-dir " + ck.string() + " --loss-log " + loss.string() +
                            " --steps " + std::to_string(steps);
    auto r = devcluster_test::run_command(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return slurp(loss);
  }

  std::string loss() const { return slurp(dir_ / "loss.txt"); }

  // Lines of a rank's progress files in a pod's work dir (all attempts), parsed.
  std::vector<Json> progress_events(const std::string& pod, const std::string& prefix) {
    std::vector<Json> out;
    std::vector<fs::path> files;
    if (!fs::exists(work(pod))) return out;
    for (const auto& e : fs::directory_iterator(work(pod)))
      if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f);
      for (std::string l; std::getline(in, l);) {
        auto j = Json::parse(l, nullptr, false);
        if (!j.is_discarded()) out.push_back(j);
      }
    }
    return out;
  }

  std::string name_;
  fs::path dir_, corpus_;
  std::unique_ptr<DevclusterProcess> dc_;
  std::shared_ptr<kube::Client> client_;
};

}  // namespace flotilla::sidecar::testing
