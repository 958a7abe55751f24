// The Helm chart (helm/flotilla) rendered by real Helm over a matrix of values files, with the
// rendered objects checked against what the issue and the operator's code require; and the
// monitoring rules checked and unit-tested by real promtool.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <tuple>

#include "tests/helm/chart_render.h"

namespace {

namespace fs = std::filesystem;
using flotilla::helm_test::Json;
using flotilla::helm_test::read_text;
using flotilla::helm_test::render;
using flotilla::helm_test::Rendered;
using flotilla::helm_test::values_dir;
using devcluster_test::run_command;

const char* kApi = " --api-versions monitoring.coreos.com/v1";

class HelmChart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = flotilla::helm_test::helm_skip_reason(); !why.empty()) GTEST_SKIP() << why;
    scratch_ = fs::temp_directory_path() /
               ("flotilla-helm-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
                std::to_string(getpid()));
  }
  void TearDown() override { fs::remove_all(scratch_); }
  Rendered render_ok(const std::string& args) {
    Rendered r = render(args, scratch_);
    EXPECT_EQ(r.exit_code, 0) << r.errors;
    return r;
  }
  std::string values(const char* name) { return " -f " + (values_dir() / name).string(); }
  fs::path scratch_;
};

std::vector<std::string> args_of(const Json& deployment) {
  return deployment["spec"]["template"]["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// (apiGroup, resource, verb, resourceNames joined) for every verb a Role or ClusterRole grants.
std::set<std::tuple<std::string, std::string, std::string, std::string>> grants(const Json& role) {
  std::set<std::tuple<std::string, std::string, std::string, std::string>> out;
  for (const Json& rule : role["rules"]) {
    std::string names;
    for (const Json& n : rule.value("resourceNames", Json::array())) names += n.get<std::string>() + ",";
    for (const Json& g : rule["apiGroups"])
      for (const Json& r : rule["resources"])
        for (const Json& v : rule["verbs"]) out.insert({g, r, v, names});
  }
  return out;
}

std::string cmake_project_version() {
  std::smatch m;
  const std::string text = read_text(fs::path(FLOTILLA_SOURCE_DIR) / "CMakeLists.txt");
  return std::regex_search(text, m, std::regex(R"(project\(flotilla VERSION ([0-9.]+))")) ? m[1].str() : "";
}

}  // namespace

TEST_F(HelmChart, LintPassesForEveryValuesFile) {
  const std::string helm = flotilla::testing::tool_path("helm") + " lint --strict " +
                           flotilla::helm_test::chart_dir().string();
  for (const char* file : {"", "monitoring.yaml", "pdb.yaml", "policy.yaml"}) {
    const auto r = run_command(helm + (*file ? values(file) : std::string()));
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.output;
    EXPECT_NE(r.output.find("0 chart(s) failed"), std::string::npos) << r.output;
  }
}

TEST_F(HelmChart, VersionsAndImageFollowTheProject) {
  const std::string chart = read_text(flotilla::helm_test::chart_dir() / "Chart.yaml");
  const std::string version = cmake_project_version();
  ASSERT_FALSE(version.empty());
  EXPECT_NE(chart.find("\nversion: 0.1.0\n"), std::string::npos);
  EXPECT_NE(chart.find("\nappVersion: \"" + version + "\"\n"), std::string::npos) << "appVersion != CMake's " << version;
  const Rendered r = render_ok("");
  const Json d = r.find("Deployment");
  EXPECT_EQ(d["spec"]["template"]["spec"]["containers"][0]["image"],
            "ghcr.io/flotilla-dev/flotilla-operator:" + version);
  const Json pinned = render_ok("--set image.tag=9.9.9").find("Deployment");
  EXPECT_EQ(pinned["spec"]["template"]["spec"]["containers"][0]["image"], "ghcr.io/flotilla-dev/flotilla-operator:9.9.9");
}

TEST_F(HelmChart, DefaultsRunOneLeaderElectedHardenedOperator) {
  const Rendered r = render_ok("");
  const Json d = r.find("Deployment");
  ASSERT_FALSE(d.is_null());
  EXPECT_EQ(d["metadata"]["namespace"], "flotilla-system");
  EXPECT_EQ(d["spec"]["replicas"], 1);
  const Json pod = d["spec"]["template"]["spec"];
  const Json c = pod["containers"][0];
  const auto args = args_of(d);
  for (const char* flag : {"--leader-elect", "--lease-name=flotilla-operator", "--lease-namespace=flotilla-system",
                           "--health-addr=:8081", "--metrics-addr=:8080"})
    EXPECT_TRUE(has(args, flag)) << flag;
  // Probes on the health port, by the port's name.
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"], "health");
  bool health_port = false;
  for (const Json& p : c["ports"]) health_port |= p["name"] == "health" && p["containerPort"] == 8081;
  EXPECT_TRUE(health_port);
  // Non-root, read-only, no escalation, nothing added, RuntimeDefault seccomp.
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 65532);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["securityContext"]["capabilities"]["drop"], Json::array({"ALL"}));
  EXPECT_EQ(c["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_FALSE(c["resources"]["requests"]["cpu"].is_null());
  EXPECT_FALSE(c["resources"]["limits"]["memory"].is_null());
  // Its own ServiceAccount; a metrics Service selecting its pods.
  const Json sa = r.find("ServiceAccount", "flotilla");
  ASSERT_FALSE(sa.is_null());
  EXPECT_EQ(pod["serviceAccountName"], sa["metadata"]["name"]);
  const Json svc = r.find("Service");
  ASSERT_FALSE(svc.is_null());
  for (const auto& [k, v] : svc["spec"]["selector"].items()) EXPECT_EQ(d["spec"]["template"]["metadata"]["labels"][k], v);
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], "metrics");
  // Off by default: monitoring objects, PDB, the catalog ConfigMap.
  EXPECT_EQ(r.count("ServiceMonitor") + r.count("PrometheusRule") + r.count("PodDisruptionBudget") +
                r.count("ConfigMap"),
            0);
  // Cluster-wide policy defaults are passed explicitly (FlexTrain's P_th 0.6, 8 h, 60 s).
  EXPECT_TRUE(has(args, "--benefit-threshold=0.6"));
  EXPECT_TRUE(has(args, "--arrival-window-seconds=28800"));
  EXPECT_TRUE(has(args, "--min-rescale-interval-seconds=60"));
  EXPECT_TRUE(has(args, "--pod-start-timeout-seconds=600"));
  EXPECT_FALSE(has(args, "--no-preemption"));
}

// The audit of operator/ and kube/: every request the operator sends, and nothing more.
//   kube/watcher.cpp       list + watch of TrainingJobs, Pods (owned), Nodes (watched)
//   operator/operator.cpp  update of trainingjobs/status; create, delete, patch (plan annotation) of pods
//   kube/event_recorder    create, patch (aggregated count) of core/v1 events
//   kube/leader_election   get, create, update of the Lease
TEST_F(HelmChart, RbacGrantsExactlyTheRequestsTheOperatorSends) {
  const Rendered r = render_ok("");
  const Json cluster_role = r.find("ClusterRole", "flotilla");
  ASSERT_FALSE(cluster_role.is_null());
  const std::set<std::tuple<std::string, std::string, std::string, std::string>> want_cluster = {
      {"", "nodes", "list", ""},
      {"", "nodes", "watch", ""},
      {"flotilla.io", "trainingjobs", "list", ""},
      {"flotilla.io", "trainingjobs", "watch", ""},
      {"flotilla.io", "trainingjobs/status", "update", ""},
      {"", "pods", "list", ""},
      {"", "pods", "watch", ""},
      {"", "pods", "create", ""},
      {"", "pods", "delete", ""},
      {"", "pods", "patch", ""},
      {"", "events", "create", ""},
      {"", "events", "patch", ""}};
  EXPECT_EQ(grants(cluster_role), want_cluster);
  const Json lease_role = r.find("Role", "flotilla-leader-election");
  ASSERT_FALSE(lease_role.is_null());
  EXPECT_EQ(lease_role["metadata"]["namespace"], "flotilla-system");
  const std::set<std::tuple<std::string, std::string, std::string, std::string>> want_lease = {
      {"coordination.k8s.io", "leases", "create", ""},  // create cannot be limited by name
      {"coordination.k8s.io", "leases", "get", "flotilla-operator,"},
      {"coordination.k8s.io", "leases", "update", "flotilla-operator,"}};
  EXPECT_EQ(grants(lease_role), want_lease);
  // Bound to the chart's ServiceAccount.
  const std::string sa = r.find("ServiceAccount", "flotilla")["metadata"]["name"];
  for (const auto& [kind, name] : {std::pair{"ClusterRoleBinding", "flotilla"},
                                   std::pair{"RoleBinding", "flotilla-leader-election"}}) {
    const Json b = r.find(kind, name);
    ASSERT_FALSE(b.is_null()) << kind;
    EXPECT_EQ(b["subjects"][0]["name"], sa);
    EXPECT_EQ(b["subjects"][0]["namespace"], "flotilla-system");
  }
  // Without leader election there is no Lease rule at all.
  EXPECT_EQ(render_ok("--set operator.leaderElection.enabled=false").count("Role"), 0);
}

// The worker pods' sidecar (trainer-sidecar/): a watch of its own pod (list + watch), a get of
// the rendezvous pod, patches of its own annotations. Bound in each listed namespace.
TEST_F(HelmChart, WorkerPodsGetAServiceAccountBoundToWhatTheSidecarSends) {
  const Rendered r = render_ok("--set 'workers.namespaces={team-a,team-b}'");
  const Json worker_role = r.find("ClusterRole", "flotilla-worker");
  ASSERT_FALSE(worker_role.is_null());
  const std::set<std::tuple<std::string, std::string, std::string, std::string>> want = {
      {"", "pods", "get", ""}, {"", "pods", "list", ""}, {"", "pods", "watch", ""}, {"", "pods", "patch", ""}};
  EXPECT_EQ(grants(worker_role), want);
  EXPECT_TRUE(has(args_of(r.find("Deployment")), "--worker-service-account=flotilla-worker"));
  for (const char* ns : {"team-a", "team-b"}) {
    int accounts = 0, bindings = 0;
    for (const Json& o : r.objects) {
      if (o["metadata"].value("namespace", "") != ns) continue;
      accounts += o["kind"] == "ServiceAccount" && o["metadata"]["name"] == "flotilla-worker";
      if (o["kind"] == "RoleBinding") {
        ++bindings;
        EXPECT_EQ(o["roleRef"]["kind"], "ClusterRole");
        EXPECT_EQ(o["roleRef"]["name"], "flotilla-worker");
        EXPECT_EQ(o["subjects"][0]["name"], "flotilla-worker");
        EXPECT_EQ(o["subjects"][0]["namespace"], ns);
      }
    }
    EXPECT_EQ(accounts, 1) << ns;
    EXPECT_EQ(bindings, 1) << ns;
  }
  // No account name: the pods run under each namespace's default account, and nothing is bound.
  const Rendered none = render_ok("--set workers.serviceAccountName=");
  EXPECT_TRUE(none.find("ClusterRole", "flotilla-worker").is_null());
  for (const std::string& a : args_of(none.find("Deployment")))
    EXPECT_EQ(a.find("--worker-service-account"), std::string::npos);
}

TEST_F(HelmChart, CrdIsTheRepositoryCrdAndKeptOnUninstallUnlessToldOtherwise) {
  std::vector<Json> source;
  std::string error;
  ASSERT_TRUE(flotilla::kube::parse_yaml_documents(
      read_text(fs::path(FLOTILLA_SOURCE_DIR) / "crds/flotilla.io_trainingjobs.yaml"), &source, &error))
      << error;
  ASSERT_EQ(source.size(), 1u);
  // No null anywhere: a YAML flow map with a comma in an unquoted description ({description: a, b})
  // makes a stray key "b: null", which kube-apiserver's strict decoding refuses (Helm 4 sends
  // with fieldValidation=Strict).
  std::function<void(const Json&, const std::string&)> no_nulls = [&](const Json& j, const std::string& path) {
    if (j.is_null()) ADD_FAILURE() << "null at " << path;
    if (j.is_object())
      for (const auto& [k, v] : j.items()) no_nulls(v, path + "." + k);
    if (j.is_array())
      for (std::size_t i = 0; i < j.size(); ++i) no_nulls(j[i], path + "[" + std::to_string(i) + "]");
  };
  no_nulls(source[0], "");
  Json crd = render_ok("").find("CustomResourceDefinition");
  ASSERT_FALSE(crd.is_null());
  EXPECT_EQ(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");
  EXPECT_EQ(crd["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm");
  // Apart from the chart's labels and the keep annotation, the object is the file in crds/.
  Json expected = source[0];
  for (const auto& [k, v] : crd["metadata"]["labels"].items())
    if (!expected["metadata"]["labels"].contains(k)) expected["metadata"]["labels"][k] = v;
  expected["metadata"]["annotations"] = crd["metadata"]["annotations"];
  EXPECT_EQ(crd, expected) << "the chart's CRD differs from crds/flotilla.io_trainingjobs.yaml:\n"
                           << Json::diff(expected, crd).dump(1);
  EXPECT_TRUE(render_ok("--set crds.keep=false")
                  .find("CustomResourceDefinition")["metadata"]
                  .value("annotations", Json::object())
                  .empty());
  EXPECT_EQ(render_ok("--set crds.install=false").count("CustomResourceDefinition"), 0);
}

TEST_F(HelmChart, MonitoringObjectsExistOnlyWhereThePrometheusOperatorApiIsServed) {
  const Rendered without = render_ok(values("monitoring.yaml"));
  EXPECT_EQ(without.count("ServiceMonitor"), 0);
  EXPECT_EQ(without.count("PrometheusRule"), 0);
  const Rendered with = render_ok(values("monitoring.yaml") + kApi);
  const Json sm = with.find("ServiceMonitor");
  ASSERT_FALSE(sm.is_null());
  EXPECT_EQ(sm["metadata"]["labels"]["release"], "kube-prometheus-stack");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"], "metrics");
  for (const auto& [k, v] : sm["spec"]["selector"]["matchLabels"].items())
    EXPECT_EQ(with.find("Service")["metadata"]["labels"][k], v) << k;
  // The PrometheusRule carries files/rules.yaml unchanged: one source with promtool's tests.
  std::vector<Json> rules;
  std::string error;
  ASSERT_TRUE(flotilla::kube::parse_yaml_documents(
      read_text(flotilla::helm_test::chart_dir() / "files/rules.yaml"), &rules, &error));
  const Json pr = with.find("PrometheusRule");
  ASSERT_FALSE(pr.is_null());
  EXPECT_EQ(pr["spec"], rules[0]);
  // Enabled but not served: nothing half-made, and without monitoring on, nothing at all.
  EXPECT_EQ(render_ok(kApi).count("ServiceMonitor") + render_ok(kApi).count("PrometheusRule"), 0);
}

TEST_F(HelmChart, DashboardConfigMapIsLabelledForTheGrafanaSidecarAndHoldsTheFile) {
  const Rendered r = render_ok(values("monitoring.yaml"));
  const Json cm = r.find("ConfigMap", "flotilla-dashboard");
  ASSERT_FALSE(cm.is_null());
  EXPECT_EQ(cm["metadata"]["labels"]["grafana_dashboard"], "1");
  const Json dashboard = Json::parse(cm["data"]["flotilla.json"].get<std::string>());
  EXPECT_EQ(dashboard, Json::parse(read_text(flotilla::helm_test::chart_dir() / "files/dashboard.json")));
  EXPECT_EQ(dashboard["title"], "Flotilla");
  EXPECT_GE(dashboard["panels"].size(), 7u);
}

TEST_F(HelmChart, PodDisruptionBudgetSelectsTheOperatorPods) {
  const Rendered r = render_ok(values("pdb.yaml"));
  const Json pdb = r.find("PodDisruptionBudget");
  ASSERT_FALSE(pdb.is_null());
  EXPECT_EQ(pdb["apiVersion"], "policy/v1");
  EXPECT_EQ(pdb["spec"]["minAvailable"], 1);
  const Json d = r.find("Deployment");
  EXPECT_EQ(d["spec"]["replicas"], 2);
  for (const auto& [k, v] : pdb["spec"]["selector"]["matchLabels"].items())
    EXPECT_EQ(d["spec"]["template"]["metadata"]["labels"][k], v) << k;
}

TEST_F(HelmChart, ScalingPolicyCatalogAndWatchedNamespaceReachTheOperator) {
  const Rendered r = render_ok(values("policy.yaml"));
  const Json d = r.find("Deployment");
  const auto args = args_of(d);
  for (const char* flag : {"--benefit-threshold=0.8", "--arrival-window-seconds=3600",
                           "--min-rescale-interval-seconds=300", "--pod-start-timeout-seconds=1800", "--no-preemption",
                           "--namespace=team-a", "--gpu-catalog=/etc/flotilla/gpu-catalog.yaml"})
    EXPECT_TRUE(has(args, flag)) << flag;
  const Json cm = r.find("ConfigMap", "flotilla-gpu-catalog");
  ASSERT_FALSE(cm.is_null());
  EXPECT_NE(cm["data"]["gpu-catalog.yaml"].get<std::string>().find("emu-slow"), std::string::npos);
  const Json pod = d["spec"]["template"]["spec"];
  bool mounted = false;
  for (const Json& m : pod["containers"][0]["volumeMounts"]) mounted |= m["mountPath"] == "/etc/flotilla";
  EXPECT_TRUE(mounted);
  EXPECT_FALSE(d["spec"]["template"]["metadata"]["annotations"]["checksum/gpu-catalog"].is_null());
  // One watched namespace: its rules move to a Role there; the ClusterRole keeps only nodes.
  const Json watched = r.find("Role", "flotilla-watched");
  ASSERT_FALSE(watched.is_null());
  EXPECT_EQ(watched["metadata"]["namespace"], "team-a");
  EXPECT_EQ(grants(r.find("ClusterRole", "flotilla")).size(), 2u);
}

TEST_F(HelmChart, MisspeltOrOutOfRangeValuesAreRefusedByTheSchema) {
  Rendered r = render(values("misspelt.yaml"), scratch_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.errors.find("benefitTreshold"), std::string::npos) << r.errors;
  r = render("--set scalingPolicy.benefitThreshold=1.5", scratch_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.errors.find("benefitThreshold"), std::string::npos) << r.errors;
  r = render("--set operator.replicass=2", scratch_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.errors.find("replicass"), std::string::npos) << r.errors;
}

// Every flag the chart renders is one the operator binary accepts (it then stops at the missing
// API server, after the flags are checked).
TEST_F(HelmChart, TheOperatorAcceptsEveryFlagTheChartRenders) {
  for (const char* file : {"", "policy.yaml"}) {
    const Rendered r = render_ok(*file ? values(file) : std::string());
    std::string cmd = std::string(FLOTILLA_BINARY_DIR) + "/operator/flotilla-operator";
    for (std::string a : args_of(r.find("Deployment"))) {
      if (a.rfind("--gpu-catalog=", 0) == 0) {  // the ConfigMap's file, where the pod would mount it
        fs::create_directories(scratch_);
        std::ofstream(scratch_ / "gpu-catalog.yaml")
            << r.find("ConfigMap", "flotilla-gpu-catalog")["data"]["gpu-catalog.yaml"].get<std::string>();
        a = "--gpu-catalog=" + (scratch_ / "gpu-catalog.yaml").string();
      }
      cmd += " '" + a + "'";
    }
    const auto out = run_command(cmd + " --kubeconfig /nonexistent/kubeconfig");
    EXPECT_NE(out.output.find("no API server configuration"), std::string::npos) << file << ": " << out.output;
  }
  // And it refuses what the schema would (direct flags bypass Helm).
  const auto bad = run_command(std::string(FLOTILLA_BINARY_DIR) +
                               "/operator/flotilla-operator --benefit-threshold=2 --kubeconfig /nonexistent/kubeconfig");
  EXPECT_NE(bad.output.find("--benefit-threshold '2' is not a probability"), std::string::npos) << bad.output;
}

class PromTool : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run_command("promtool --version").exit_code != 0)
      GTEST_SKIP() << "promtool is not installed: run scripts/install-deps.sh (Debian package prometheus)";
  }
};

TEST_F(PromTool, RulesCheckAndEveryAlertsUnitTestPasses) {
  const fs::path rules = flotilla::helm_test::chart_dir() / "files/rules.yaml";
  auto r = run_command("promtool check rules " + rules.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SUCCESS: 12 rules found"), std::string::npos) << r.output;
  const fs::path tests = fs::path(FLOTILLA_SOURCE_DIR) / "tests/helm/rules_test.yaml";
  r = run_command("promtool test rules " + tests.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Each alert has a test: the test file names every alert of the rules file.
  const std::string rules_text = read_text(rules), tests_text = read_text(tests);
  std::smatch m;
  std::string rest = rules_text;
  int alerts = 0;
  while (std::regex_search(rest, m, std::regex(R"(- alert: (\w+))"))) {
    ++alerts;
    EXPECT_NE(tests_text.find("alertname: " + m[1].str()), std::string::npos) << m[1] << " has no unit test";
    rest = m.suffix();
  }
  EXPECT_EQ(alerts, 6);
}

// The unit tests can fail: each alert's threshold loosened or tightened breaks them.
TEST_F(PromTool, UnitTestsFailWhenAThresholdMoves) {
  const fs::path dir = fs::temp_directory_path() / ("flotilla-promtool-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string rules = read_text(flotilla::helm_test::chart_dir() / "files/rules.yaml");
  std::string tests = read_text(fs::path(FLOTILLA_SOURCE_DIR) / "tests/helm/rules_test.yaml");
  tests.replace(tests.find("../../helm/flotilla/files/rules.yaml"), 36, "rules.yaml");
  std::ofstream(dir / "test.yaml") << tests;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"flotilla_rescaling_oldest_seconds) > 600", "flotilla_rescaling_oldest_seconds) > 6000"},
           {"flotilla:rescales:increase1h > 10", "flotilla:rescales:increase1h > 5"},
           {"flotilla:reconcile_error_ratio:rate5m > 0.05", "flotilla:reconcile_error_ratio:rate5m > 0.005"},
           {"(max(flotilla_leader) or vector(0)) < 1", "max(flotilla_leader) < 1"},
           {"flotilla_memory_prediction_error_ratio) > 0.2", "flotilla_memory_prediction_error_ratio) > 0.05"},
           {"flotilla_worker_out_of_memory_total[30m])) > 0", "flotilla_worker_out_of_memory_total[30m])) > 1"}}) {
    std::string mutated = rules;
    const auto at = mutated.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    mutated.replace(at, from.size(), to);
    std::ofstream(dir / "rules.yaml") << mutated;
    const auto r = run_command("promtool test rules " + (dir / "test.yaml").string());
    EXPECT_NE(r.exit_code, 0) << "the unit tests still pass with " << to;
  }
  fs::remove_all(dir);
}
