// apps/v1 Deployments (the controller, rollouts, readiness probes), ServiceAccount tokens in pod
// processes, and policy/v1 PodDisruptionBudgets, against the real devcluster binary and kubectl.
#include <gtest/gtest.h>

#include <set>

#include "devcluster_process.h"

using namespace devcluster_test;

namespace {

std::string helper() { return std::string(FLOTILLA_BINARY_DIR) + "/tests/devcluster/devcluster_pod_helper"; }

Json deployment(const std::string& name, int replicas, Json container, Json strategy = nullptr) {
  Json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", name}}},
            {"spec",
             {{"replicas", replicas},
              {"selector", {{"matchLabels", {{"app", name}}}}},
              {"template",
               {{"metadata", {{"labels", {{"app", name}}}}},
                {"spec", {{"terminationGracePeriodSeconds", 2}, {"containers", Json::array({container})}}}}}}}};
  if (!strategy.is_null()) d["spec"]["strategy"] = strategy;
  return d;
}

Json sleeper(const std::string& marker) {
  return {{"name", "main"}, {"image", "none"}, {"command", Json::array({"sleep", "1000"})},
          {"env", Json::array({{{"name", "MARKER"}, {"value", marker}}})}};
}

class DevclusterWorkloads : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dc.start()) << dc.log(); }

  // Pods of a deployment (by label), not terminating: name → {hash, ready}.
  std::map<std::string, std::pair<std::string, bool>> pods_of(const std::string& app) {
    std::map<std::string, std::pair<std::string, bool>> out;
    auto [code, list] = dc.call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3D" + app);
    for (const auto& p : list.value("items", Json::array())) {
      if (p["metadata"].contains("deletionTimestamp")) continue;
      bool ready = false;
      for (const auto& c : p.value("/status/conditions"_json_pointer, Json::array()))
        if (c.value("type", "") == "Ready") ready = c.value("status", "") == "True";
      out[p["metadata"]["name"]] = {p["metadata"]["labels"].value("pod-template-hash", ""), ready};
    }
    return out;
  }
  int ready_count(const std::string& app) {
    int n = 0;
    for (const auto& [name, v] : pods_of(app)) n += v.second ? 1 : 0;
    return n;
  }
  Json get(const std::string& path) { return dc.call("GET", path).second; }

  DevclusterProcess dc{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

}  // namespace

TEST_F(DevclusterWorkloads, DeploymentKeepsReplicasReplacesDeletedPodsAndIsGarbageCollected) {
  auto [code, created] = dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3, sleeper("a")));
  ASSERT_EQ(code, 201) << created.dump();
  // Defaults as kube-apiserver sets them.
  EXPECT_EQ(created["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
  EXPECT_EQ(created["spec"]["progressDeadlineSeconds"], 600);
  EXPECT_EQ(created["spec"]["template"]["spec"]["restartPolicy"], "Always");
  ASSERT_TRUE(eventually([&] { return ready_count("web") == 3; })) << dc.log();
  auto pods = pods_of("web");
  const Json dep = get("/apis/apps/v1/namespaces/default/deployments/web");
  // Pods → ReplicaSet web-<pod-template-hash> → Deployment, as kube-controller-manager builds it.
  for (const auto& [name, v] : pods) {
    Json p = get("/api/v1/namespaces/default/pods/" + name);
    ASSERT_EQ(p["metadata"]["ownerReferences"].size(), 1u);
    const Json& ref = p["metadata"]["ownerReferences"][0];
    EXPECT_EQ(ref["kind"], "ReplicaSet");
    EXPECT_EQ(ref["name"], "web-" + v.first);
    EXPECT_EQ(ref["controller"], true);
    EXPECT_EQ(name.rfind("web-" + v.first + "-", 0), 0u) << name;
    Json rs = get("/apis/apps/v1/namespaces/default/replicasets/web-" + v.first);
    EXPECT_EQ(rs["metadata"]["uid"], ref["uid"]);
    EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["uid"], dep["metadata"]["uid"]);
  }
  // The ReplicaSet's status observes its current generation (kstatus reads it).
  ASSERT_TRUE(eventually([&] {
    Json rs = get("/apis/apps/v1/namespaces/default/replicasets/web-" + pods.begin()->second.first);
    return rs["spec"]["replicas"] == 3 && rs.value("/status/readyReplicas"_json_pointer, 0) == 3 &&
           rs.value("/status/observedGeneration"_json_pointer, 0LL) == rs["metadata"].value("generation", -1LL);
  }));
  ASSERT_TRUE(eventually([&] {
    Json s = get("/apis/apps/v1/namespaces/default/deployments/web")["status"];
    return s.value("availableReplicas", 0) == 3 && s.value("observedGeneration", 0) == 1;
  }));
  // kubectl agrees it is rolled out, and its table shows the counts.
  EXPECT_EQ(dc.kubectl("rollout status deployment/web --timeout=20s").exit_code, 0);
  auto table = dc.kubectl("get deployment web");
  EXPECT_NE(table.output.find("3/3"), std::string::npos) << table.output;

  // A deleted pod is replaced; the replacement has the same template hash.
  const std::string victim = pods.begin()->first;
  ASSERT_EQ(dc.kubectl("delete pod " + victim + " --wait=false").exit_code, 0);
  ASSERT_TRUE(eventually([&] {
    auto now = pods_of("web");
    return now.size() == 3 && !now.count(victim) && ready_count("web") == 3;
  })) << dc.log();

  // Scaling down and up.
  ASSERT_EQ(dc.kubectl("scale deployment web --replicas=1").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return pods_of("web").size() == 1; }));
  ASSERT_EQ(dc.kubectl("scale deployment web --replicas=2").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return ready_count("web") == 2; }));

  // Deleting the deployment deletes its ReplicaSets and pods (ownerReferences + garbage collector).
  ASSERT_EQ(dc.kubectl("delete deployment web").exit_code, 0);
  ASSERT_TRUE(eventually([&] { return pods_of("web").empty(); }, 15s));
  EXPECT_TRUE(get("/apis/apps/v1/namespaces/default/replicasets")["items"].empty());
}

TEST_F(DevclusterWorkloads, TemplateChangeRollsPodsWithinSurgeAndUnavailability) {
  // maxSurge 1, maxUnavailable 0: never fewer than 3 ready pods, never more than 4 pods.
  Json strategy = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", 1}, {"maxUnavailable", 0}}}};
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("roll", 3, sleeper("v1"), strategy)).first, 201);
  ASSERT_TRUE(eventually([&] { return ready_count("roll") == 3; }));
  const std::string old_hash = pods_of("roll").begin()->second.first;
  auto [code, patched] = dc.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/roll",
                                 {{"spec", {{"template", {{"spec", {{"containers", Json::array({sleeper("v2")})}}}}}}}},
                                 "application/merge-patch+json");
  ASSERT_EQ(code, 200) << patched.dump();
  EXPECT_EQ(patched["metadata"]["generation"], 2);
  int min_ready = 3, max_pods = 3;
  bool done = eventually(
      [&] {
        auto pods = pods_of("roll");
        int ready = 0;
        bool all_new = true;
        for (const auto& [n, v] : pods) {
          ready += v.second;
          all_new = all_new && v.first != old_hash;
        }
        min_ready = std::min(min_ready, ready);
        max_pods = std::max(max_pods, static_cast<int>(pods.size()));
        return all_new && pods.size() == 3 && ready == 3;
      },
      30s);
  ASSERT_TRUE(done) << dc.log();
  EXPECT_GE(min_ready, 3);
  EXPECT_LE(max_pods, 4);
  ASSERT_TRUE(eventually([&] {
    Json s = get("/apis/apps/v1/namespaces/default/deployments/roll")["status"];
    return s.value("observedGeneration", 0) == 2 && s.value("updatedReplicas", 0) == 3 && s.value("replicas", 0) == 3;
  }));
  auto rollout = dc.kubectl("rollout status deployment/roll --timeout=20s");
  EXPECT_EQ(rollout.exit_code, 0) << rollout.output;
  // Two revisions: the old ReplicaSet is kept, scaled to 0.
  auto history = dc.kubectl("get rs -l app=roll -o jsonpath={.items[*].spec.replicas}");
  EXPECT_TRUE(history.output == "0 3" || history.output == "3 0") << history.output;
  EXPECT_EQ(get("/apis/apps/v1/namespaces/default/deployments/roll")["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "2");
  // Every pod runs the new template: its process sees MARKER=v2.
  for (const auto& [name, v] : pods_of("roll")) {
    Json p = get("/api/v1/namespaces/default/pods/" + name);
    EXPECT_EQ(p["spec"]["containers"][0]["env"][0]["value"], "v2");
  }

  // A selector that does not select the template is refused as kube-apiserver does.
  Json bad = deployment("bad", 1, sleeper("x"));
  bad["spec"]["selector"]["matchLabels"]["app"] = "other";
  auto [bad_code, refused] = dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", bad);
  EXPECT_EQ(bad_code, 422);
  EXPECT_NE(refused.value("message", "").find("`selector` does not match template `labels`"), std::string::npos) << refused.dump();
}

TEST_F(DevclusterWorkloads, ReadinessProbeGatesReadyAndAvailability) {
  const int port = 20000 + getpid() % 20000;
  Json c = {{"name", "web"}, {"image", "none"},
            {"command", Json::array({helper(), "serve", std::to_string(port)})},
            {"ports", Json::array({{{"name", "http"}, {"containerPort", port}}})},
            {"readinessProbe", {{"httpGet", {{"path", "/readyz"}, {"port", "http"}}}, {"periodSeconds", 1}, {"failureThreshold", 1}}}};
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("probed", 1, c)).first, 201);
  ASSERT_TRUE(eventually([&] {
    auto pods = pods_of("probed");
    if (pods.size() != 1) return false;
    Json p = get("/api/v1/namespaces/default/pods/" + pods.begin()->first);
    return p.value("/status/phase"_json_pointer, std::string()) == "Running";
  }));
  // Running but answering 503: not Ready, the Deployment not Available.
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(ready_count("probed"), 0);
  Json status = get("/apis/apps/v1/namespaces/default/deployments/probed")["status"];
  EXPECT_EQ(status.value("availableReplicas", 0), 0) << status.dump();
  // The probe target turns healthy: the pod becomes Ready and the Deployment Available.
  const std::string pod = pods_of("probed").begin()->first;
  Json p = get("/api/v1/namespaces/default/pods/" + pod);
  std::string uid = p["metadata"]["uid"];
  write_text(dc.data_dir() / "pods" / "default" / (pod + "-" + uid.substr(0, 8)) / "ready", "");
  ASSERT_TRUE(eventually([&] { return ready_count("probed") == 1; })) << dc.log();
  ASSERT_TRUE(eventually([&] {
    Json s = get("/apis/apps/v1/namespaces/default/deployments/probed")["status"];
    for (const auto& cond : s.value("conditions", Json::array()))
      if (cond.value("type", "") == "Available") return cond.value("status", "") == "True" && s.value("availableReplicas", 0) == 1;
    return false;
  }));
  // And back: failing the probe takes it out of Ready again.
  fs::remove(dc.data_dir() / "pods" / "default" / (pod + "-" + uid.substr(0, 8)) / "ready");
  ASSERT_TRUE(eventually([&] { return ready_count("probed") == 0; }));
}

TEST_F(DevclusterWorkloads, PodProcessTalksToTheApiAsItsServiceAccount) {
  // A ServiceAccount allowed to get pods in its namespace, nothing else.
  ASSERT_EQ(dc.kubectl("create serviceaccount reader").exit_code, 0);
  ASSERT_EQ(dc.kubectl("create role pod-getter --verb=get --resource=pods").exit_code, 0);
  ASSERT_EQ(dc.kubectl("create rolebinding reader-gets --role=pod-getter --serviceaccount=default:reader").exit_code, 0);
  // Every namespace has a `default` ServiceAccount, as in Kubernetes.
  EXPECT_EQ(dc.call("GET", "/api/v1/namespaces/default/serviceaccounts/default").first, 200);
  Json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "client"}}},
            {"spec", {{"restartPolicy", "Never"}, {"serviceAccountName", "reader"},
                      {"containers", Json::array({{{"name", "main"}, {"image", "none"},
                                                   {"command", Json::array({helper(), "in-cluster"})}}})}}}};
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", p).first, 201);
  ASSERT_TRUE(eventually([&] { return get("/api/v1/namespaces/default/pods/client").value("/status/phase"_json_pointer, std::string()) == "Succeeded"; }));
  auto logs = dc.kubectl("logs client");
  const std::string uid = get("/api/v1/namespaces/default/pods/client")["metadata"]["uid"];
  EXPECT_NE(logs.output.find("config server=https://127.0.0.1:"), std::string::npos) << logs.output;
  EXPECT_NE(logs.output.find("namespace=default"), std::string::npos) << logs.output;
  EXPECT_NE(logs.output.find("own-pod ok uid=" + uid), std::string::npos) << logs.output;
  EXPECT_NE(logs.output.find("list error 403 pods is forbidden: User \"system:serviceaccount:default:reader\" cannot list "
                             "resource \"pods\" in API group \"\" in the namespace \"kube-system\""),
            std::string::npos)
      << logs.output;
  // The mounted files are the standard three; the token is private.
  fs::path sa_dir = dc.data_dir() / "pods" / "default" / ("client-" + uid.substr(0, 8)) / "serviceaccount";
  EXPECT_EQ(read_text(sa_dir / "namespace"), "default");
  EXPECT_EQ(read_text(sa_dir / "ca.crt"), read_text(dc.data_dir() / "pki" / "ca.crt"));
  EXPECT_EQ(fs::status(sa_dir / "token").permissions() & fs::perms::group_read, fs::perms::none);

  // automountServiceAccountToken: false mounts nothing, so in-cluster config fails.
  p["metadata"]["name"] = "no-token";
  p["spec"]["automountServiceAccountToken"] = false;
  ASSERT_EQ(dc.call("POST", "/api/v1/namespaces/default/pods", p).first, 201);
  ASSERT_TRUE(eventually([&] { return get("/api/v1/namespaces/default/pods/no-token").value("/status/phase"_json_pointer, std::string()) == "Failed"; }));
  auto no_token = dc.kubectl("logs no-token");
  EXPECT_NE(no_token.output.find("config-error"), std::string::npos) << no_token.output;

  // A pod naming a ServiceAccount that does not exist is refused (ServiceAccount admission).
  p["metadata"]["name"] = "ghost";
  p["spec"]["serviceAccountName"] = "ghost";
  auto [code, refused] = dc.call("POST", "/api/v1/namespaces/default/pods", p);
  EXPECT_EQ(code, 403);
  EXPECT_EQ(refused.value("message", ""),
            "pods \"ghost\" is forbidden: error looking up service account default/ghost: serviceaccount \"ghost\" not found");
}

TEST_F(DevclusterWorkloads, PodDisruptionBudgetRoundTripsWithTypedDecode) {
  const std::string yaml = R"(apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web-pdb}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
)";
  write_text(dc.dir() / "pdb.yaml", yaml);
  auto applied = dc.kubectl("apply -f " + (dc.dir() / "pdb.yaml").string());
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  Json pdb = get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb");
  EXPECT_EQ(pdb["spec"]["minAvailable"], 1);
  EXPECT_EQ(pdb["spec"]["selector"]["matchLabels"]["app"], "web");
  // Its status follows the pods it selects (as the disruption controller computes it).
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("web", 3, sleeper("p"))).first, 201);
  ASSERT_TRUE(eventually([&] {
    Json s = get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb").value("status", Json::object());
    return s.value("expectedPods", 0) == 3 && s.value("currentHealthy", 0) == 3 && s.value("desiredHealthy", 0) == 1 &&
           s.value("disruptionsAllowed", 0) == 2;
  }, 15s)) << get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb").dump();
  auto table = dc.kubectl("get pdb web-pdb");
  EXPECT_NE(table.output.find("MIN AVAILABLE"), std::string::npos) << table.output;
  // A wrong type is a 400 from the typed decode, as kube-apiserver answers.
  Json bad = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}, {"metadata", {{"name", "bad"}}},
              {"spec", {{"selector", {{"matchLabels", "app=web"}}}}}};
  auto [code, refused] = dc.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", bad);
  EXPECT_EQ(code, 400);
  EXPECT_NE(refused.value("message", "").find("cannot unmarshal string into Go struct field"), std::string::npos) << refused.dump();
  ASSERT_EQ(dc.kubectl("delete pdb web-pdb").exit_code, 0);
  EXPECT_EQ(dc.call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web-pdb").first, 404);
}

TEST_F(DevclusterWorkloads, RecreateNeverOverlapsAndARefusedPodIsAReplicaFailure) {
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments",
                    deployment("re", 2, sleeper("v1"), {{"type", "Recreate"}})).first, 201);
  ASSERT_TRUE(eventually([&] { return ready_count("re") == 2; }));
  const std::string old_hash = pods_of("re").begin()->second.first;
  ASSERT_EQ(dc.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/re",
                    {{"spec", {{"template", {{"spec", {{"containers", Json::array({sleeper("v2")})}}}}}}}},
                    "application/merge-patch+json").first, 200);
  // Recreate: the new template's pods appear only once every old pod (terminating ones too) is gone.
  bool overlapped = false;
  ASSERT_TRUE(eventually(
      [&] {
        auto [c, list] = dc.call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dre");
        int old_n = 0, new_n = 0, ready_new = 0;
        for (const auto& p : list["items"]) {
          bool is_old = p["metadata"]["labels"].value("pod-template-hash", "") == old_hash;
          (is_old ? old_n : new_n)++;
          if (!is_old && !p["metadata"].contains("deletionTimestamp"))
            for (const auto& cond : p.value("/status/conditions"_json_pointer, Json::array()))
              ready_new += cond.value("type", "") == "Ready" && cond.value("status", "") == "True";
        }
        overlapped = overlapped || (old_n > 0 && new_n > 0);
        return old_n == 0 && ready_new == 2;
      },
      30s))
      << dc.log();
  EXPECT_FALSE(overlapped);

  // A pod the API refuses (its ServiceAccount does not exist) is reported on the Deployment.
  Json ghost = deployment("ghost", 1, sleeper("x"));
  ghost["spec"]["template"]["spec"]["serviceAccountName"] = "ghost";
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", ghost).first, 201);
  std::string message;
  ASSERT_TRUE(eventually([&] {
    for (const auto& c : get("/apis/apps/v1/namespaces/default/deployments/ghost").value("/status/conditions"_json_pointer, Json::array()))
      if (c.value("type", "") == "ReplicaFailure" && c.value("reason", "") == "FailedCreate") message = c.value("message", "");
    return !message.empty();
  }));
  EXPECT_NE(message.find("error looking up service account default/ghost"), std::string::npos) << message;
}

TEST_F(DevclusterWorkloads, FailingLivenessProbeRestartsTheContainer) {
  // Nothing listens on this port: a tcpSocket liveness probe fails and the container restarts.
  const int port = 40000 + getpid() % 20000;
  Json c = sleeper("live");
  c["livenessProbe"] = {{"tcpSocket", {{"port", port}}}, {"periodSeconds", 1}, {"failureThreshold", 1}};
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("live", 1, c)).first, 201);
  ASSERT_TRUE(eventually(
      [&] {
        auto pods = pods_of("live");
        if (pods.size() != 1) return false;
        Json p = get("/api/v1/namespaces/default/pods/" + pods.begin()->first);
        return p.value("/status/containerStatuses/0/restartCount"_json_pointer, 0) >= 1;
      },
      15s))
      << dc.log();
  EXPECT_NE(dc.log().find("failed its liveness probe"), std::string::npos);

  // Probes are stored unchecked, as kube-apiserver's opaque fields here: a malformed one is
  // reported and ignored, never a crash of the kubelet.
  Json odd = sleeper("odd");
  odd["readinessProbe"] = {{"httpGet", {{"path", 5}, {"port", "nope"}}}};
  ASSERT_EQ(dc.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment("odd", 1, odd)).first, 201);
  ASSERT_TRUE(eventually([&] { return ready_count("odd") == 1; })) << dc.log();
  EXPECT_NE(dc.log().find("the readiness probe uses a malformed probe"), std::string::npos) << dc.log();
}

TEST_F(DevclusterWorkloads, KubectlCreateDeploymentSendsProtobufAndRuns) {
  auto created = dc.kubectl("create deployment made --image=example.invalid/x --replicas=2 --port=8080 -- sleep 1000");
  ASSERT_EQ(created.exit_code, 0) << created.output;
  Json d = get("/apis/apps/v1/namespaces/default/deployments/made");
  EXPECT_EQ(d["spec"]["replicas"], 2);
  EXPECT_EQ(d["spec"]["selector"]["matchLabels"]["app"], "made");
  const Json& c = d["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["command"], Json({"sleep", "1000"}));
  EXPECT_EQ(c["image"], "example.invalid/x");
  EXPECT_EQ(c["ports"][0]["containerPort"], 8080);
  EXPECT_EQ(d["spec"]["template"]["spec"]["restartPolicy"], "Always");  // defaulted, not "" from the wire
  auto rollout = dc.kubectl("rollout status deployment/made --timeout=20s");
  EXPECT_EQ(rollout.exit_code, 0) << rollout.output;
}
