// Two thousand mutated TrainingJob manifests sent to the real API server while the real operator
// runs. The API server refuses each bad one with a 4xx that names the field; every one it
// accepts gets a phase from the operator, each failure with a condition saying why; the
// operator neither crashes nor stops answering /healthz.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/net/http_client.h"
#include "tests/operator/local_cluster_fixture.h"
#include "tests/operator/manifest_mutator.h"

using namespace operator_e2e;

TEST_F(LocalCluster, TwoThousandMutatedManifestsNeverCrashTheOperator) {
  const auto up = up_state();
  const pid_t op = up.value("operatorPid", 0);
  ASSERT_GT(op, 0);
  auto config = flotilla::kube::load_kubeconfig((dir_ / "state/kubeconfig").string());
  ASSERT_TRUE(config);
  auto client = flotilla::kube::Client::create(*config).value();
  const flotilla::kube::Resource tjs{"flotilla.io", "v1alpha1", "trainingjobs", "TrainingJob", true};

  operator_fuzz::ManifestMutator mutator(424242);
  std::vector<std::string> accepted;
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string name = "fuzz-" + std::to_string(i);
    nlohmann::json job = mutator.mutate(operator_fuzz::valid_job(name, (dir_ / "data.txt").string(),
                                                                 (dir_ / ("ckpt-" + name)).string()));
    if (!job.is_object()) continue;
    job["metadata"] = {{"name", name}};
    auto created = client->create(tjs, "default", job);
    if (created) {
      accepted.push_back(name);
      continue;
    }
    ++refused;
    const flotilla::kube::Error& e = created.error();
    ASSERT_GE(e.http_status, 400) << "mutant " << i << ": " << e.describe();
    ASSERT_LT(e.http_status, 500) << "mutant " << i << " made the API server fail: " << e.describe() << "\n"
                                  << job.dump();
    const std::string said = e.describe();
    EXPECT_NE(said.find("spec"), std::string::npos) << "mutant " << i << ": the refusal names no field: " << said;
  }
  std::printf("2000 mutants: %zu accepted by the API server, %d refused with a 4xx\n", accepted.size(), refused);
  ASSERT_GT(accepted.size(), 100u) << "the mutants hardly reach the operator";
  ASSERT_GT(refused, 100);

  // Every accepted job gets a decision from the allocator (not just the first "waiting for the
  // allocator's first pass"); a Failed or FitsNowhere one says why in a condition.
  std::map<std::string, int> phases;
  const bool all_seen = wait_for(
      [&] {
        auto list = client->list(tjs, "default");
        if (!list) return false;
        phases.clear();
        for (const auto& j : (*list)["items"]) {
          std::string phase = j.value("/status/phase"_json_pointer, std::string("(none)"));
          for (const auto& c : j.value("/status/conditions"_json_pointer, nlohmann::json::array()))
            if (c.value("type", "") == "Planned" && c.value("status", "") == "False")
              phase += "/" + c.value("reason", "");
          ++phases[phase];
        }
        return phases["(none)"] == 0 && phases["Pending/WaitingForAllocator"] == 0;
      },
      150s);
  std::string counts;
  for (const auto& [phase, n] : phases) counts += phase + ": " + std::to_string(n) + "  ";
  std::printf("phases: %s\n", counts.c_str());
  EXPECT_TRUE(all_seen) << "jobs without a phase after 150 s: " << counts;
  auto list = client->list(tjs, "default");
  ASSERT_TRUE(list);
  std::map<std::string, int> invalid_fields;
  for (const auto& j : (*list)["items"]) {
    for (const auto& c : j.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
      if (c.value("reason", "") != "InvalidSpec") continue;
      const std::string message = c.value("message", "");
      EXPECT_EQ(message.rfind("spec.", 0), 0u) << j["metadata"]["name"] << ": no field path in '" << message << "'";
      ++invalid_fields[message.substr(0, message.find(':'))];
    }
    std::string why = "(no Failed or FitsNowhere condition)";
    for (const auto& c : j.value("/status/conditions"_json_pointer, nlohmann::json::array()))
      if (c.value("type", "") == "Failed" || c.value("reason", "") == "FitsNowhere") why = c.value("message", "");
    if (why == "(no Failed or FitsNowhere condition)") continue;
    EXPECT_FALSE(why.empty()) << j["metadata"]["name"] << " failed without saying why: " << j["status"].dump();
    EXPECT_NE(why, "no plan fits the allowed GPU types") << j["metadata"]["name"] << ": not the planner's reason";
  }
  for (const auto& [field, n] : invalid_fields) std::printf("accepted by the schema, refused by the operator: %s x%d\n", field.c_str(), n);
  EXPECT_EQ(::kill(op, 0), 0) << "the operator died";
  flotilla::kube::net::ClientConfig health;
  health.server = "http://127.0.0.1:" + std::to_string(up.value("healthPort", 0));
  std::string http_error;
  auto http = flotilla::kube::net::HttpClient::create(health, &http_error);
  ASSERT_TRUE(http) << http_error;
  const auto answer = http->get("/healthz");
  EXPECT_TRUE(answer.ok() && answer.response.status == 200) << "the operator stopped answering /healthz";
  // Stop the admitted jobs' pods before the cluster goes down.
  for (const auto& name : accepted) (void)client->remove(tjs, "default", name);
}
